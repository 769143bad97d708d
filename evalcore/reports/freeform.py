"""Free-form QA tables shaped like the paper's Table 2, shared by ``evalcore score freeform`` and run reports.

Table 2: rows = system × condition, columns = metrics, cells = mean [CI]. The discrimination statistics
say whether a metric notices the audio (paired difference correct − random per model, with its CI)
and whether it ranks the paraphrase skyline above the adversarial rewrite (paraphrase − adversarial).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import pandas as pd

from evalcore.kinds.base import kinds_where
from evalcore.reports.tables_html import fmt
from evalcore.core.schema import ERRORED

ROLE_NAMES = {"paraphrase": "paraphrase skyline", "adversarial": "adversarial rewrite"}
_PROFILE = re.compile(r"\[profile (\w+);")


def ci_cell(value: Any, lo: Any, hi: Any) -> str:
    return f"{fmt(value)} [{fmt(lo)}, {fmt(hi)}]"


def table2(summary: pd.DataFrame, groups: list[str], metrics: list[str], kind: str = "value",
           mark_above_zero: bool = False, min_items: int = 0) -> list[str]:
    """Rows = groups (e.g. model, condition), columns = metrics, cells = value [CI], like the paper's Table 2;
    ``kind`` picks value or paired_diff rows, ``mark_above_zero`` appends ↑ where the CI lies above 0 over at
    least ``min_items`` items (and "(n < min_items)" where it lies above 0 over fewer).
    The cell's ``errored`` count (explicit denominators), when the rows hold one, is a last integer column."""
    vals = summary[summary["kind"] == kind]
    metrics = [m for m in metrics if m != ERRORED]
    errored = bool((vals["metric"] == ERRORED).any())
    heads = [*groups, "n", *metrics, *([ERRORED] if errored else [])]
    lines = [f"| {' | '.join(heads)} |", "|" + "---|" * len(heads)]
    keyed = vals.groupby(groups, sort=True, dropna=False) if groups else [((), vals)]
    for key, g in keyed:
        key = key if isinstance(key, tuple) else (key,)
        scored = g[g["metric"] != ERRORED]
        if g.empty:  # no scored row at all (no groups)
            continue
        cell = {r.metric: ci_cell(r.value, r.ci_low, r.ci_high) + _mark(r, mark_above_zero, min_items)
                for r in scored.itertuples()}
        n = str(int(scored["n"].max())) if len(scored) else "0"
        tail = [str(int(g.loc[g["metric"] == ERRORED, "value"].sum()))] if errored else []
        lines.append(f"| {' | '.join([*map(str, key), n, *(cell.get(m, '') for m in metrics), *tail])} |")
    return lines


def _mark(r: Any, above_zero: bool, min_items: int) -> str:
    if not above_zero or not r.ci_low > 0:
        return ""
    return " ↑" if int(r.n or 0) >= min_items else f" (n < {min_items})"


def skyline_verdict(diff: float, ci_low: float | None = None, n: int | None = None, min_items: int = 0) -> str:
    """Whether paraphrase − adversarial = ``diff`` ranks the skyline above (with the CI when known; a CI over
    fewer than ``min_items`` items is not read)."""
    if not diff > 0:
        return "does NOT rank the skyline above"
    if ci_low is None or pd.isna(ci_low):
        return "ranks the skyline above"
    if n is not None and int(n) < min_items:
        return f"ranks the skyline above (too few items for the CI: n={int(n)} < {min_items})"
    return "ranks the skyline above (CI > 0)" if ci_low > 0 else "ranks the skyline above (CI includes 0)"


def skyline_check(summary: pd.DataFrame, groups: list[str], metrics: list[str]) -> list[str]:
    """Paraphrase vs adversarial per metric when they are values of the ``condition`` column (score freeform)."""
    if "condition" not in groups:
        return []
    vals = summary[summary["kind"] == "value"].set_index([*groups, "metric"])["value"]
    others = [g for g in groups if g != "condition"]
    lines = []
    keys = summary[others].drop_duplicates().itertuples(index=False) if others else [()]
    for key in keys:
        key = tuple(key)
        for m in metrics:
            try:
                para = vals[(*key[: len(others)], "paraphrase", m)] if others else vals[("paraphrase", m)]
                adv = vals[(*key[: len(others)], "adversarial", m)] if others else vals[("adversarial", m)]
            except KeyError:
                continue
            lines.append(f"- {', '.join(map(str, key)) or 'all'} · {m}: paraphrase {fmt(para)} vs adversarial "
                         f"{fmt(adv)} → {skyline_verdict(para - adv)}")
    return ["", "Paraphrase (skyline) vs adversarial rewrite:", "", *lines] if lines else []


def run_sections(summary: pd.DataFrame, conf: int, roles: Mapping[str, str], rewrite_label: str,
                 min_items: int = 0) -> list[str]:
    """The free-form part of a run report, per dataset: Table 2 and the discrimination statistics.

    ``roles``: model → ``paraphrase`` | ``adversarial`` for the reference-rewrite systems; paraphrase −
    adversarial rows are those whose model starts with ``rewrite_label``."""
    kinds = (summary["protocol_kind"] if "protocol_kind" in summary.columns else summary["protocol"]) \
        .fillna(summary["protocol"])
    every = summary[kinds.isin(kinds_where("text_metrics"))]
    out: list[str] = []
    for proto, rows in every.groupby("protocol", sort=True):  # an instance named after its kind needs no prefix
        named_as_kind = (kinds[rows.index] == proto).all()
        out += _instance_sections(rows, conf, roles, rewrite_label, "" if named_as_kind else f"{proto} · ", min_items)
    return out


def _instance_sections(every: pd.DataFrame, conf: int, roles: Mapping[str, str], rewrite_label: str,
                       title: str, min_items: int = 0) -> list[str]:
    """The sections of one free-form protocol instance (``title`` prefixes its name unless it is the kind's)."""
    ff = every[every["group"] == "all"]
    out: list[str] = []
    for ds, d in ff.groupby("dataset", sort=True):
        vals = d[d["kind"] == "value"]
        metrics = list(dict.fromkeys(vals["metric"]))
        profiles = sorted({m.group(1) for m in map(_PROFILE.search, vals["definition"].astype(str)) if m})
        view = vals.assign(model=[f"{m} ({ROLE_NAMES[roles[m]]})" if m in roles else m for m in vals["model"]])
        groups = ["model", "variant", "condition"] if vals["variant"].nunique() > 1 else ["model", "condition"]
        out += ["", f"## Free-form QA · {title}{ds} (Table 2)", "",
                f"Profile `{', '.join(profiles) or '?'}`; mean per pair [{conf} % CI] over n items; rows = system × "
                "condition. Reference-rewrite systems (recognised by their backend, not their name) are marked; "
                "definitions under *Metric definitions*.", "", *table2(view, groups, metrics)]
        subsets = every[(every["dataset"] == ds) & (every["kind"] == "value")
                        & every["group"].astype(str).str.startswith("task=")]
        for task, sd in subsets.groupby("group", sort=True):  # e.g. MusicQA's captioning questions (App. C.1)
            sd = sd.assign(model=[f"{m} ({ROLE_NAMES[roles[m]]})" if m in roles else m for m in sd["model"]])
            out += ["", f"Subset `{task}`:", "", *table2(sd, groups, metrics)]
        diffs = d[d["kind"] == "paired_diff"]
        listen = diffs[~diffs["model"].astype(str).str.startswith(rewrite_label) & ~diffs["model"].isin(list(roles))]
        if len(listen):
            out += ["", f"Does the metric notice the audio? Paired difference correct − condition over the same "
                        f"items [{conf} % CI]; ↑ = CI above 0 over at least {min_items} items.", "",
                    *table2(listen, groups, metrics, "paired_diff", mark_above_zero=True, min_items=min_items)]
        sky = diffs[diffs["model"].astype(str).str.startswith(rewrite_label)]
        if len(sky):
            out += ["", f"Paraphrase skyline − adversarial rewrite over the same items [{conf} % CI] (a metric that "
                        "judges musical content should rank the skyline above):", "",
                    *table2(sky, groups, metrics, "paired_diff"), ""]
            out += [f"- {r.model} · {r.condition} · {r.metric}: {ci_cell(r.value, r.ci_low, r.ci_high)} → "
                    f"{skyline_verdict(r.value, r.ci_low, r.n, min_items)}" for r in sky.itertuples()]
    return out
