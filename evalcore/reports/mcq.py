"""Multiple-choice sections of the run report, rendered from the long-form summary table.

* **Audio-attention test** (HumMusQA Table 2, MuChoMusic's audio-attention test): per model,
  accuracy mean ± SD over option orders with the correct audio and under noise, silence, a
  random track and no audio; then the paired difference correct − condition over the same
  questions with its bootstrap CI, and whether accuracy drops (CI above 0).
* **Breakdowns**: accuracy mean ± SD over orders, consistency and IFR per value of each
  breakdown (task, category, secondary category, difficulty, dimension — MuChoMusic's Knowledge and
  Reasoning overall and per dimension —, genre), correct audio. A protocol's
  ``breakdown_min_share`` (HumMusQA's Figure 1: 0.05) leaves the categories holding at most that
  share of the questions out of the category breakdown, naming them.
* **Chosen option types**: the share of answers choosing the correct option, each distractor
  type and none (datasets with typed distractors, e.g. MuChoMusic).

Sections are per protocol instance (its name, e.g. ``muchomusic`` and ``hummusqa`` side by side)
and dataset. Denominators are explicit: ``accuracy`` is over the answered and unanswered
requests of a cell, its errored requests left out; ``accuracy_with_errors`` counts them as
wrong; a cell with errored requests says how many. Where the judge follows a published rule, each table
has evalcore's strict reading beside the rule's own figure (``accuracy_strict``: a table of its own in the
attention test, with its paired differences; a column in the breakdowns).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from evalcore.reports.verdict import MIN_ITEMS, ci_over, interval_label, paired_test_label
from evalcore.core.schema import strict_name

__all__ = ["ATTENTION_CONDITIONS", "sections", "attention_sections", "breakdown_sections", "chosen_sections"]

KIND = "mcq"
STRICT = strict_name("accuracy")
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
    if summary.empty:
        return summary
    kinds = summary["protocol_kind"] if "protocol_kind" in summary.columns else summary["protocol"]
    return summary[kinds.fillna(summary["protocol"]) == KIND]


def _instances(df: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """(protocol instance, dataset, rows) of the multiple-choice summary rows."""
    return [(p, ds, d) for (p, ds), d in df.groupby(["protocol", "dataset"], sort=True)]


def _value(df: pd.DataFrame, metric: str) -> dict[tuple, float]:
    """(dataset, model, variant, group, condition) → value of ``metric``."""
    d = df[(df["kind"] == "value") & (df["metric"] == metric)]
    return {(r.dataset, r.model, r.variant, r.group, r.condition): r.value for r in d.itertuples()}


def _with_errored(cell: str, errored: Any) -> str:
    """A cell's text, with its errored request count when there are any."""
    if errored is None or (isinstance(errored, float) and math.isnan(errored)) or not errored:
        return cell
    return f"{cell} ({int(errored)} errored)"


def _verdict(value: float, lo: float, hi: float, n: int, min_items: int) -> str:
    """Whether accuracy drops without the audio; tiny-n and zero-width intervals are flagged, not judged."""
    label = interval_label(value, lo, hi, n, min_items)
    if label.startswith(("n/a", "too few", "degenerate")):
        return label
    if label.startswith("all items"):  # a zero-width interval away from 0: decided by its sign, flagged
        return f"{'yes' if lo > 0 else 'no, it rises'} ({label})"
    if lo > 0:
        return "yes (CI > 0)"
    return "no, it rises (CI < 0)" if hi < 0 else "no (CI includes 0)"


def attention_sections(summary: pd.DataFrame, conf: int, min_items: int = MIN_ITEMS) -> list[str]:
    """The audio-attention table and its paired tests, per protocol instance and dataset (nothing without a
    second condition)."""
    df = _mcq(summary)
    if df.empty:
        return []
    out: list[str] = []
    for proto, ds, dd in _instances(df[df["group"] == "all"]):
        out += _attention(proto, ds, dd, conf, min_items)
    return out


def _attention(proto: str, ds: str, df: pd.DataFrame, conf: int, min_items: int) -> list[str]:
    acc, sd, err = _value(df, "accuracy"), _value(df, "accuracy_sd"), _value(df, "errored")
    acc_err, strict = _value(df, "accuracy_with_errors"), _value(df, STRICT)
    diffs = df[(df["kind"] == "paired_diff") & df["metric"].isin(["accuracy", STRICT])]
    dd = df[df["kind"] == "value"]
    present = set(dd["condition"])
    conds = [c for c in ATTENTION_CONDITIONS if c in present] + sorted(present - set(ATTENTION_CONDITIONS))
    if "correct" not in conds or len(conds) < 2:
        return []
    models = list(dict.fromkeys(zip(dd["model"], dd["variant"])))
    out = ["", f"## Audio-attention test · {proto} · {ds}", "",
           "Accuracy (%) mean ± SD over option orders with the correct audio and with fake or no audio "
           "(as in HumMusQA's Table 2). A model that uses the audio loses accuracy without it. Accuracy is over "
           "the answered and unanswered requests; a cell's errored requests are left out and counted beside it."]
    rows = [[m, v, *[_with_errored(_acc_sd(acc.get((ds, m, v, "all", c)), sd.get((ds, m, v, "all", c))),
                                   err.get((ds, m, v, "all", c))) for c in conds]] for m, v in models]
    out += ["", _md(["model", "variant", *conds], rows)]
    if any(err.get((ds, m, v, "all", c)) for m, v in models for c in conds):
        rows = [[m, v, *[_pct(acc_err.get((ds, m, v, "all", c))) for c in conds]] for m, v in models]
        out += ["", "Accuracy (%) counting errored requests as wrong (accuracy_with_errors):", "",
                _md(["model", "variant", *conds], rows)]
    if strict:  # a published rule: the table above is its verdict; evalcore's strict reading of it beside
        rows = [[m, v, *[_pct(strict.get((ds, m, v, "all", c))) for c in conds]] for m, v in models]
        out += ["", "Accuracy (%) by evalcore's strict reading of the published rule (accuracy_strict: the one option "
                    "named, never guessed; the table above is the rule's own verdict):", "",
                _md(["model", "variant", *conds], rows)]
    order = {f"correct-{c}": i for i, c in enumerate(conds)}
    prow = []
    for r in sorted(diffs.itertuples(), key=lambda r: (r.model, r.variant, r.metric, order.get(r.condition, 99))):
        diff = "n/a" if math.isnan(r.value) else f"{100 * r.value:+.1f} [{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}]"
        contrast = r.condition if r.metric == "accuracy" else f"{r.condition} (strict)"
        prow.append([r.model, r.variant, contrast, diff, r.n, ci_over(r), paired_test_label(r),
                     _verdict(r.value, r.ci_low, r.ci_high, r.n, min_items)])
    if prow:
        out += ["", f"Paired test: accuracy difference correct − condition in percentage points over the same "
                    f"questions, {conf} % bootstrap CI (clips resampled, every question of a clip together, where "
                    f"questions share one, else questions: CI over); under {min_items} questions a CI decides "
                    "nothing, and a zero-width interval is flagged (degenerate at 0, else all questions differ by the "
                    "same amount). With one option order each question's outcome is right or wrong and McNemar's "
                    "exact test is given too (Holm-adjusted over the run's tests).", "",
                _md(["model", "variant", "contrast", "Δ accuracy (pp)", "n", "CI over", "test", "accuracy drops?"],
                    prow)]
    return out


def _left_out(keys: list[tuple], ns: dict[tuple, int], totals: dict[tuple, int], min_share: float) -> set[str]:
    """Category values holding at most ``min_share`` of their cell's questions (HumMusQA's Figure 1 rule)."""
    if not min_share:
        return set()
    return {k[3].split("=", 1)[1] for k in keys
            if totals.get((k[0], k[1], k[2], k[4])) and ns[k] / totals[(k[0], k[1], k[2], k[4])] <= min_share}


def breakdown_sections(summary: pd.DataFrame, condition: str = "correct",
                       protocols: dict[str, Any] | None = None) -> list[str]:
    """Per protocol instance, dataset and breakdown (task, category, …): accuracy mean ± SD, consistency, IFR."""
    df = _mcq(summary)
    if df.empty:
        return []
    every = df[(df["kind"] == "value") & (df["condition"] == condition)]
    out: list[str] = []
    for proto, ds, dd in _instances(every):
        min_share = float(((protocols or {}).get(proto) or {}).get("breakdown_min_share") or 0.0)
        out += _breakdowns(proto, ds, dd, condition, min_share)
    return (["", "## Multiple-choice breakdowns"] + out) if out else []


def _breakdowns(proto: str, ds: str, dd: pd.DataFrame, condition: str, min_share: float) -> list[str]:
    acc, sd, strict = _value(dd, "accuracy"), _value(dd, "accuracy_sd"), _value(dd, STRICT)
    cons, ifr = _value(dd, "consistency"), _value(dd, "ifr")
    totals = {(r.dataset, r.model, r.variant, r.condition): r.n
              for r in dd[(dd["metric"] == "accuracy") & (dd["group"] == "all")].itertuples()}
    df = dd[(dd["group"] != "all") & ~dd["group"].str.startswith(_SPECIAL_PREFIXES)]
    ns = {(r.dataset, r.model, r.variant, r.group, r.condition): r.n
          for r in df[df["metric"] == "accuracy"].itertuples()}
    out: list[str] = []
    for name in dict.fromkeys(g.split("=", 1)[0] for g in df["group"]):
        keys = sorted({k for k in ns if k[3].split("=", 1)[0] == name}, key=lambda k: (k[1], k[2], k[3]))
        dropped = _left_out(keys, ns, totals, min_share) if name == "category" else set()
        keys = [k for k in keys if k[3].split("=", 1)[1] not in dropped]
        if not keys:
            continue
        rows = [[k[1], k[2], k[3].split("=", 1)[1], ns[k], _acc_sd(acc.get(k), sd.get(k)),
                 *([_pct(strict.get(k))] if strict else []), _pct(cons.get(k)), _pct(ifr.get(k))] for k in keys]
        out += ["", f"### {proto} · {ds} by {name} ({condition} audio)", "",
                _md(["model", "variant", name, "questions", "accuracy % (mean ± SD over orders)",
                     *(["accuracy_strict %"] if strict else []), "consistency %", "IFR %"], rows)]
        if dropped:
            out += ["", f"Left out (each at most {100 * min_share:g} % of the questions): {', '.join(sorted(dropped))}."]
    return out


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
    for proto, ds, dd in _instances(df):
        types = list(dict.fromkeys(g.split("=", 1)[1] for g in dd["group"]))
        rows = []
        for (m, v, c), g in dd.groupby(["model", "variant", "condition"], sort=True):
            by = dict(zip(g["group"].str.split("=", n=1).str[1], g["value"]))
            rows.append([m, v, c, int(g["n"].max()), *[_pct(by.get(t)) for t in types]])
        out += ["", f"### {proto} · {ds}", "", _md(["model", "variant", "condition", "questions", *types], rows)]
    return out


def sections(summary: pd.DataFrame, conf: int, protocols: dict[str, Any] | None = None,
             min_items: int = MIN_ITEMS) -> list[str]:
    """Every multiple-choice section (empty when the run has no multiple-choice rows); ``protocols``: the run's
    protocol instances (run.json), for their report options; ``min_items``: the fewest questions a paired test
    needs to decide anything."""
    return (attention_sections(summary, conf, min_items) + breakdown_sections(summary, protocols=protocols)
            + chosen_sections(summary))
