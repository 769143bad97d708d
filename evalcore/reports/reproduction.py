"""A run beside the paper: every published cell of one table (``configs/paper/published.csv``) with the run's
value for the same key, its confidence interval, the difference and whether the published value lies inside
the interval. A cell the run has no value for is a row too, with the reason (its model, protocol, condition
or metric is not in the run), so nothing the paper printed goes missing from the comparison.

Published percentages (``unit`` ``%``) are compared as shares, the unit evalcore reports; a published
``sd`` is shown beside the value (the paper's spread over its own runs, not our interval).
"""

from __future__ import annotations

import pandas as pd

from evalcore.reports.published import Cell

COLUMNS = ["paper", "table", "protocol", "dataset", "model", "condition", "variant", "group", "metric", "printed",
           "published", "published_sd", "ours", "ci_low", "ci_high", "n", "difference", "inside_ci", "status"]
KEYS = ["protocol", "dataset", "model", "condition", "variant", "group", "metric"]


def _scale(c: Cell) -> float:
    return 0.01 if c.unit == "%" else 1.0


def _why_missing(c: Cell, summary: pd.DataFrame) -> str:
    """The first key of the cell the run does not have, in words."""
    for col, label in (("model", "model"), ("protocol", "protocol"), ("dataset", "dataset"),
                       ("condition", "condition"), ("variant", "variant"), ("metric", "metric"), ("group", "group")):
        if col in summary.columns and getattr(c, col) not in set(summary[col].astype(str)):
            return f"not run: {label} {getattr(c, col)!r} is not in this run"
    return "not run: this combination is not in this run"


def reproduction(summary: pd.DataFrame, cells: list[Cell]) -> pd.DataFrame:
    """One row per published cell: ours (value, CI, n) beside the paper's, or the reason there is none. A key
    column the summary does not have (an ``evalcore score`` summary has no protocol or dataset) matches any value."""
    values = summary[summary["kind"] == "value"] if "kind" in summary.columns else summary
    keys = [k for k in KEYS if k in values.columns]
    index = {tuple(str(v) for v in k): r for k, r in zip(values[keys].itertuples(index=False, name=None),
                                                         values.itertuples(index=False))}
    rows = []
    for c in cells:
        s = _scale(c)
        row = {"paper": c.paper, "table": c.table, **dict(zip(KEYS, c.summary_key)),
               "printed": c.value + (f" ± {c.sd}" if c.sd else "") + (c.unit if c.unit == "%" else ""),
               "published": c.number * s, "published_sd": (c.sd_number * s) if c.sd_number is not None else None,
               "ours": None, "ci_low": None, "ci_high": None, "n": None, "difference": None, "inside_ci": None}
        hit = index.get(tuple(getattr(c, k) for k in keys))
        if hit is None or pd.isna(hit.value):
            rows.append({**row, "status": _why_missing(c, summary) if hit is None else "no value (nothing scored)"})
            continue
        inside = None if pd.isna(hit.ci_low) else bool(hit.ci_low <= row["published"] <= hit.ci_high)
        rows.append({**row, "ours": float(hit.value), "ci_low": hit.ci_low, "ci_high": hit.ci_high,
                     "n": int(hit.n) if not pd.isna(hit.n) else None, "difference": float(hit.value) - row["published"],
                     "inside_ci": inside, "status": "compared"})
    return pd.DataFrame(rows, columns=COLUMNS)


def _f(x: object, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and pd.isna(x)):
        return "—"
    return f"{float(x):+.3f}" if signed else f"{float(x):.3f}"


def section(rep: pd.DataFrame, key: str, confidence: float, rows_at: str = "tables/reproduction.parquet") -> str:
    """The report's Markdown section: the table's cells beside ours, then the cells the run could not give;
    ``rows_at`` names the Parquet file holding every row (a run's ``tables/reproduction.parquet``; ``evalcore
    reproduce`` writes it where its ``--out`` says)."""
    if not len(rep):
        return f"\n## Beside the paper: {key}\n\nThe published values name no cell of {key}.\n"
    done = rep[rep["status"] == "compared"]
    inside = int(done["inside_ci"].fillna(False).astype(bool).sum())
    conf = int(round(confidence * 100))
    lines = ["", f"## Beside the paper: {key}", "",
             f"{len(done)} of {len(rep)} published cells compared; the published value lies inside our {conf} % CI "
             f"in {inside} of them. Published percentages are compared as shares. "
             f"`{rows_at}` holds every row.", ""]
    if len(done):
        lines += ["| model | protocol · dataset | condition | variant | metric | published | ours [CI] | "
                  "difference | inside CI |", "|---|---|---|---|---|---|---|---|---|"]
        for r in done.itertuples(index=False):
            group = "" if r.group == "all" else f" ({r.group})"
            lines.append(f"| {r.model} | {r.protocol} · {r.dataset} | {r.condition} | {r.variant} | {r.metric}{group}"
                         f" | {r.printed} | {_f(r.ours)} [{_f(r.ci_low)}, {_f(r.ci_high)}] | {_f(r.difference, True)}"
                         f" | {'yes' if r.inside_ci else 'no' if r.inside_ci is False else '—'} |")
    missing = rep[rep["status"] != "compared"]
    if len(missing):
        lines += ["", f"Not run here ({len(missing)} cell(s)):", ""]
        for why, g in missing.groupby("status", sort=True):
            what = sorted({f"{m} {p} {c} {v} {met}" for m, p, c, v, met in
                           zip(g["model"], g["protocol"], g["condition"], g["variant"], g["metric"])})
            shown = "; ".join(what[:6]) + (f"; … {len(what) - 6} more" if len(what) > 6 else "")
            lines.append(f"* {why} — {len(g)} cell(s): {shown}")
    return "\n".join(lines) + "\n"
