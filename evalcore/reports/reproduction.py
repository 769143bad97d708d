"""A run beside the paper: every published cell of the tables a run reproduces (``configs/paper/published.csv``)
with the run's value for the same key, its confidence interval, the difference and whether the published value
lies inside the interval. A cell the run has no value for is a row too, with the reason (its model, protocol,
condition or metric is not in the run), so nothing the paper printed goes missing from the comparison.

The papers' numbers in the prose (each paper's ``text`` table, :mod:`evalcore.reports.published`) join the tables
of their paper where the run computes the same quantity, and only there: a prose number is a remark, not a table
to reproduce, unless ``paper/text`` is named itself. Two of their quantities are facts of the dataset (protocol,
model, condition and variant ``any``), computed from the summary's counts (:data:`DERIVED`): ``items``, the
questions of a group (the largest ``n`` of its ``correct`` cells over the run's protocols on that dataset, errored
requests included), and ``items_share``, that count as a share of the dataset's.

Published percentages (``unit`` ``%``) are compared as shares, the unit evalcore reports; a published
``sd`` is shown beside the value (the paper's spread over its own runs, not our interval). A published upper
bound ("less than 3.5 %") is printed with "<" and has no "inside CI".
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from evalcore.reports.published import ANY, PUBLISHED_CSV, Cell, read

COLUMNS = ["paper", "table", "protocol", "dataset", "model", "condition", "variant", "group", "metric", "printed",
           "published", "published_sd", "ours", "ci_low", "ci_high", "n", "difference", "inside_ci", "status",
           "quote"]
KEYS = ["protocol", "dataset", "model", "condition", "variant", "group", "metric"]
#: metrics of the prose computed from the summary's counts, not looked up
DERIVED = ("items", "items_share")
#: the metric whose ``n`` counts a group's questions, errored ones included (else any metric's largest ``n``)
COUNTING = ("accuracy_with_errors", "accuracy")


def _scale(c: Cell) -> float:
    return 0.01 if c.unit == "%" else 1.0


def tables_named(keys: Sequence[str], cells: Sequence[Cell]) -> tuple[list[Cell], list[Cell]]:
    """The cells of each named ``paper/table``, in the order named, and the prose cells (``paper/text``) of the
    papers named whose text table is not itself named (shown only where the run computes them)."""
    named = [c for k in keys for c in cells if c.key == k]
    papers = dict.fromkeys(k.split("/", 1)[0] for k in keys)
    prose = [c for p in papers for c in cells if c.paper == p and c.table == "text" and c.key not in keys]
    return named, prose


MISSING_ORDER = ("model", "protocol", "dataset", "condition", "variant", "metric", "group")


def _why_missing(c: Cell, present: dict[str, set[str]]) -> str:
    """The first key of the cell the run does not have, in words (``present``: each summary column's values)."""
    for col in MISSING_ORDER:
        value = getattr(c, col)
        if value == ANY or col == "metric" and c.metric in DERIVED:
            continue
        if col in present and value not in present[col]:
            return f"not run: {col} {value!r} is not in this run"
    return "not run: this combination is not in this run"


def _counts(values: pd.DataFrame) -> dict[tuple[str, str, str], int]:
    """(protocol, dataset, group) → questions: the largest ``n`` of the correct-audio cells of a counting metric
    (:data:`COUNTING`), else of any metric; protocol ``any`` is the largest over a dataset's protocols."""
    need = {"protocol", "dataset", "group", "condition", "metric", "n"}
    if not need <= set(values.columns):
        return {}
    rows = values[(values["condition"].astype(str) == "correct") & values["n"].notna()]
    rows = rows.assign(counting=rows["metric"].isin(COUNTING))
    out: dict[tuple[str, str, str], int] = {}
    for (protocol, dataset, group), g in rows.groupby(["protocol", "dataset", "group"], sort=False):
        n = int((g[g["counting"]] if g["counting"].any() else g)["n"].max())
        for key in ((str(protocol), str(dataset), str(group)), (ANY, str(dataset), str(group))):
            out[key] = max(out.get(key, 0), n)
    return out


def _derived(counts: dict[tuple[str, str, str], int], c: Cell) -> float | None:
    """``items`` or ``items_share`` of the cell's group, None when the run has no such group."""
    n = counts.get((c.protocol, c.dataset, c.group))
    if c.metric == "items" or n is None:
        return n
    total = counts.get((c.protocol, c.dataset, "all"))
    return n / total if total else None


def _row(c: Cell) -> dict:
    s = _scale(c)
    return {"paper": c.paper, "table": c.table, **dict(zip(KEYS, c.summary_key)),
            "printed": ("< " if c.is_bound else "") + c.value + (f" ± {c.sd}" if c.sd else "")
            + (c.unit if c.unit == "%" else ""),
            "published": c.number * s, "published_sd": (c.sd_number * s) if c.sd_number is not None else None,
            "ours": None, "ci_low": None, "ci_high": None, "n": None, "difference": None, "inside_ci": None,
            "quote": c.quote}


def _compared(row: dict, ours: float, ci_low: float | None, ci_high: float | None, n: int | None,
              bound: bool) -> dict:
    inside = None if bound or ci_low is None or pd.isna(ci_low) else bool(ci_low <= row["published"] <= ci_high)
    return {**row, "ours": float(ours), "ci_low": ci_low, "ci_high": ci_high, "n": n,
            "difference": float(ours) - row["published"], "inside_ci": inside, "status": "compared"}


def reproduction(summary: pd.DataFrame, cells: Sequence[Cell], prose: Sequence[Cell] = ()) -> pd.DataFrame:
    """One row per published cell of ``cells``: ours (value, CI, n) beside the paper's, or the reason there is
    none; then one row per cell of ``prose`` the run computes (the others are left out). A cell's condition may be a
    paired difference (``correct-random``: the summary's ``paired_diff`` row). A key column the summary does not
    have (an ``evalcore score`` summary has no protocol or dataset) matches any value."""
    kinds = summary["kind"] if "kind" in summary.columns else pd.Series("value", index=summary.index)
    values, both = summary[kinds == "value"], summary[kinds.isin(["value", "paired_diff"])]
    keys = [k for k in KEYS if k in values.columns]
    present = {col: set(summary[col].astype(str)) for col in MISSING_ORDER if col in summary.columns}
    counts = _counts(values)
    index = {tuple(str(v) for v in k): r for k, r in zip(both[keys].itertuples(index=False, name=None),
                                                         both.itertuples(index=False))}
    rows = []
    for c, required in [(c, True) for c in cells] + [(c, False) for c in prose]:
        row = _row(c)
        if c.metric in DERIVED:
            got = _derived(counts, c)
            if got is not None:
                rows.append(_compared(row, got, None, None, None, c.is_bound))
            elif required:
                rows.append({**row, "status": _why_missing(c, present)})
            continue
        hit = index.get(tuple(getattr(c, k) for k in keys))
        if hit is not None and not pd.isna(hit.value):
            rows.append(_compared(row, hit.value, hit.ci_low, hit.ci_high, None if pd.isna(hit.n) else int(hit.n),
                                  c.is_bound))
        elif required:
            rows.append({**row, "status": _why_missing(c, present) if hit is None else "no value (nothing scored)"})
    return pd.DataFrame(rows, columns=COLUMNS)


def compare(summary: pd.DataFrame, keys: Sequence[str], values: str | None = None) -> pd.DataFrame:
    """:func:`reproduction` of the tables ``keys`` names (and their papers' prose) from the published-values file
    ``values`` (default: configs/paper/published.csv)."""
    named, prose = tables_named(keys, read(values or PUBLISHED_CSV))
    return reproduction(summary, named, prose)


def _f(x: object, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and pd.isna(x)):
        return "—"
    return f"{float(x):+.3f}" if signed else f"{float(x):.3f}"


def _compared_lines(done: pd.DataFrame) -> list[str]:
    lines = ["| model | protocol · dataset | condition | variant | metric | published | ours [CI] | difference | "
             "inside CI |", "|---|---|---|---|---|---|---|---|---|"]
    for r in done.itertuples(index=False):
        group = "" if r.group == "all" else f" ({r.group})"
        count = r.metric == "items"  # a count of questions, not a score
        ours = (f"{r.ours:.0f}" if count else _f(r.ours)) + (
            f" [{_f(r.ci_low)}, {_f(r.ci_high)}]" if r.ci_low is not None and not pd.isna(r.ci_low) else "")
        difference = f"{r.difference:+.0f}" if count else _f(r.difference, True)
        lines.append(f"| {r.model} | {r.protocol} · {r.dataset} | {r.condition} | {r.variant} | {r.metric}{group} | "
                     f"{r.printed} | {ours} | {difference} | "
                     f"{'yes' if r.inside_ci is True else 'no' if r.inside_ci is False else '—'} |")
    return lines


def section(rep: pd.DataFrame, key: str | Sequence[str], confidence: float,
            rows_at: str = "tables/reproduction.parquet") -> str:
    """The report's Markdown section: each table's cells beside ours, the cells the run could not give, then the
    numbers in the prose the run computes, each with its sentence; ``rows_at`` names the Parquet file holding every
    row (a run's ``tables/reproduction.parquet``; ``evalcore reproduce`` writes it where its ``--out`` says)."""
    keys = [key] if isinstance(key, str) else list(key)
    title = ", ".join(keys)
    if not len(rep):
        return f"\n## Beside the paper: {title}\n\nThe published values name no cell of {title}.\n"
    named = (rep["paper"] + "/" + rep["table"]).isin(keys)
    tables, prose = rep[named], rep[~named]
    done = tables[tables["status"] == "compared"]
    inside = int(done["inside_ci"].fillna(False).astype(bool).sum())
    conf = int(round(confidence * 100))
    lines = ["", f"## Beside the paper: {title}", "",
             f"{len(done)} of {len(tables)} published cells compared; the published value lies inside our {conf} % "
             f"CI in {inside} of them. Published percentages are compared as shares. "
             f"`{rows_at}` holds every row.", ""]
    for k in dict.fromkeys(tables["paper"] + "/" + tables["table"]):
        mine = done[done["paper"] + "/" + done["table"] == k]
        if len(keys) > 1:
            lines += [f"### {k}", ""]
        lines += _compared_lines(mine) if len(mine) else ["No cell of it compared."]
        lines.append("")
    missing = tables[tables["status"] != "compared"]
    if len(missing):
        lines += [f"Not run here ({len(missing)} cell(s)):", ""]
        for why, g in missing.groupby("status", sort=True):
            what = sorted({f"{m} {p} {c} {v} {met}" for m, p, c, v, met in
                           zip(g["model"], g["protocol"], g["condition"], g["variant"], g["metric"])})
            shown = "; ".join(what[:6]) + (f"; … {len(what) - 6} more" if len(what) > 6 else "")
            lines.append(f"* {why} — {len(g)} cell(s): {shown}")
        lines.append("")
    if len(prose):
        lines += ["### In the prose", "",
                  "The papers' numbers in the text that this run computes too (`items`: questions counted in the "
                  "run; `items_share`: their share of the dataset's).", ""]
        lines += _compared_lines(prose[prose["status"] == "compared"]) + [""]
        lines += [f"* {m}{'' if g == 'all' else f' ({g})'}: “{q}”" for m, g, q in
                  zip(prose["metric"], prose["group"], prose["quote"])]
    return "\n".join(lines).rstrip("\n") + "\n"
