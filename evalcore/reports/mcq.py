"""Multiple-choice sections of the run report, rendered from the long-form summary table.

* **Audio-attention test** (HumMusQA Table 2, MuChoMusic's audio-attention test): per model,
  accuracy mean ± SD over option orders with the correct audio and under noise, silence, a
  random track and no audio; then the paired difference correct − condition over the same
  questions with its bootstrap CI, and whether accuracy drops (CI above 0).
* **Breakdowns**: accuracy mean ± SD over orders, consistency and IFR per value of each
  breakdown (task, category, secondary category, difficulty, dimension, genre), correct audio.
* **Chosen option types**: the share of answers choosing the correct option, each distractor
  type and none (datasets with typed distractors, e.g. MuChoMusic).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

__all__ = ["ATTENTION_CONDITIONS", "sections", "attention_sections", "breakdown_sections", "chosen_sections"]

PROTOCOL = "mcq"
#: the conditions of the attention table, in column order
ATTENTION_CONDITIONS = ("correct", "noise", "silence", "random", "text_only")
_SPECIAL_PREFIXES = ("chosen=",)


def _pct(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"


def _acc_sd(acc: Any, sd: Any) -> str:
    if acc is None or (isinstance(acc, float) and math.isnan(acc)):
        return "n/a"
    return _pct(acc) if sd is None or (isinstance(sd, float) and math.isnan(sd)) else f"{_pct(acc)} ± {_pct(sd)}"


def _md(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def _mcq(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary["protocol"] == PROTOCOL] if not summary.empty else summary


def _value(df: pd.DataFrame, metric: str) -> dict[tuple, float]:
    """(dataset, model, variant, group, condition) → value of ``metric``."""
    d = df[(df["kind"] == "value") & (df["metric"] == metric)]
    return {(r.dataset, r.model, r.variant, r.group, r.condition): r.value for r in d.itertuples()}


def _verdict(lo: float, hi: float) -> str:
    if lo is None or math.isnan(lo):
        return "n/a"
    if lo > 0:
        return "yes (CI > 0)"
    return "no, it rises (CI < 0)" if hi < 0 else "no (CI includes 0)"


def attention_sections(summary: pd.DataFrame, conf: int) -> list[str]:
    """The audio-attention table and its paired tests, per dataset (nothing without a second condition)."""
    df = _mcq(summary)
    if df.empty:
        return []
    df = df[df["group"] == "all"]
    acc, sd = _value(df, "accuracy"), _value(df, "accuracy_sd")
    diffs = df[(df["kind"] == "paired_diff") & (df["metric"] == "accuracy")]
    out: list[str] = []
    for ds, dd in df[df["kind"] == "value"].groupby("dataset", sort=True):
        present = set(dd["condition"])
        conds = [c for c in ATTENTION_CONDITIONS if c in present] + sorted(present - set(ATTENTION_CONDITIONS))
        if "correct" not in conds or len(conds) < 2:
            continue
        models = list(dict.fromkeys(zip(dd["model"], dd["variant"])))
        out += ["", f"## Audio-attention test · {PROTOCOL} · {ds}", "",
                "Accuracy (%) mean ± SD over option orders with the correct audio and with fake or no audio "
                "(as in HumMusQA's Table 2). A model that uses the audio loses accuracy without it."]
        rows = [[m, v, *[_acc_sd(acc.get((ds, m, v, "all", c)), sd.get((ds, m, v, "all", c))) for c in conds]]
                for m, v in models]
        out += ["", _md(["model", "variant", *conds], rows)]
        dsd = diffs[diffs["dataset"] == ds]
        order = {f"correct-{c}": i for i, c in enumerate(conds)}
        prow = []
        for r in sorted(dsd.itertuples(), key=lambda r: (r.model, r.variant, order.get(r.condition, 99))):
            diff = "n/a" if math.isnan(r.value) else f"{100 * r.value:+.1f} [{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}]"
            prow.append([r.model, r.variant, r.condition, diff, r.n, _verdict(r.ci_low, r.ci_high)])
        if prow:
            out += ["", f"Paired test: accuracy difference correct − condition in percentage points over the same "
                        f"questions, {conf} % bootstrap CI (questions resampled).", "",
                    _md(["model", "variant", "contrast", "Δ accuracy (pp)", "n", "accuracy drops?"], prow)]
    return out


def breakdown_sections(summary: pd.DataFrame, condition: str = "correct") -> list[str]:
    """Per breakdown (task, category, …) a table of accuracy mean ± SD, consistency and IFR."""
    df = _mcq(summary)
    if df.empty:
        return []
    df = df[(df["kind"] == "value") & (df["condition"] == condition) & (df["group"] != "all")
            & ~df["group"].str.startswith(_SPECIAL_PREFIXES)]
    acc, sd = _value(df, "accuracy"), _value(df, "accuracy_sd")
    cons, ifr = _value(df, "consistency"), _value(df, "ifr")
    ns = {(r.dataset, r.model, r.variant, r.group, r.condition): r.n
          for r in df[df["metric"] == "accuracy"].itertuples()}
    out: list[str] = []
    for ds, dd in df.groupby("dataset", sort=True):
        names = list(dict.fromkeys(g.split("=", 1)[0] for g in dd["group"]))
        for name in names:
            keys = sorted({k for k in ns if k[0] == ds and k[3].split("=", 1)[0] == name},
                          key=lambda k: (k[1], k[2], k[3]))
            if not keys:
                continue
            rows = [[k[1], k[2], k[3].split("=", 1)[1], ns[k], _acc_sd(acc.get(k), sd.get(k)),
                     _pct(cons.get(k)), _pct(ifr.get(k))] for k in keys]
            out += ["", f"### {PROTOCOL} · {ds} by {name} ({condition} audio)", "",
                    _md(["model", "variant", name, "questions", "accuracy % (mean ± SD over orders)",
                         "consistency %", "IFR %"], rows)]
    return (["", "## Multiple-choice breakdowns"] + out) if out else []


def chosen_sections(summary: pd.DataFrame) -> list[str]:
    """Share of answers per chosen option type (correct, IR, CU, IU, none)."""
    df = _mcq(summary)
    if df.empty:
        return []
    df = df[(df["kind"] == "value") & df["group"].str.startswith("chosen=")]
    if df.empty:
        return []
    out = ["", "## Chosen option types", "",
           "Share (%) of answers choosing the correct option, each distractor type (IR incorrect but related, "
           "CU correct but unrelated, IU incorrect and unrelated) or none (unanswered)."]
    for ds, dd in df.groupby("dataset", sort=True):
        types = list(dict.fromkeys(g.split("=", 1)[1] for g in dd["group"]))
        rows = []
        for (m, v, c), g in dd.groupby(["model", "variant", "condition"], sort=True):
            by = dict(zip(g["group"].str.split("=", n=1).str[1], g["value"]))
            rows.append([m, v, c, int(g["n"].max()), *[_pct(by.get(t)) for t in types]])
        out += ["", f"### {PROTOCOL} · {ds}", "", _md(["model", "variant", "condition", "questions", *types], rows)]
    return out


def sections(summary: pd.DataFrame, conf: int) -> list[str]:
    """Every multiple-choice section (empty when the run has no multiple-choice rows)."""
    return attention_sections(summary, conf) + breakdown_sections(summary) + chosen_sections(summary)
