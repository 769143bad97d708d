"""Readable numbers and tables for pages people open in the morning: 3 significant digits, p-values as
``< 0.001``, differences with their interval, flagged rows first and highlighted. Used by the nightly
dashboard and the ``evalcore compare`` page (HTML and Markdown from the same rows)."""

from __future__ import annotations

import html
import math
from typing import Any, Iterable

import numpy as np
import pandas as pd

from evalcore.reports.html import breakable, header_breakable


def _nan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x: Any) -> str:
    """A value with 3 significant digits and no exponent (``0.000`` for |x| < 0.0005); ``—`` when missing."""
    if _nan(x):
        return "—"
    if isinstance(x, (bool, str, int, np.integer)):
        return str(x)
    x = float(x)
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) < 0.0005:
        return "0.000"
    digits = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{min(digits, 3)}f}"


def fmt(v: Any) -> str:
    """A number to three decimals, or an en dash for a missing value (the report's tables)."""
    missing = v is None or v is pd.NA or (isinstance(v, (float, np.floating)) and math.isnan(v))
    return "–" if missing else f"{v:.3f}"


def signed(x: Any) -> str:
    """A difference with its sign (``+0.123``, ``−0.500``)."""
    if _nan(x):
        return "—"
    s = num(x)
    return s if s.startswith("-") or s == "0.000" else "+" + s


def p_value(p: Any) -> str:
    """``< 0.001``, ``0.012``, ``1``."""
    if _nan(p):
        return "—"
    p = float(p)
    if p < 0.001:
        return "< 0.001"
    return "1" if p >= 0.9995 else f"{p:.3f}"


def interval(delta: Any, lo: Any, hi: Any) -> str:
    """``−0.512 [−0.610, −0.400]``."""
    return f"{signed(delta)} [{signed(lo)}, {signed(hi)}]" if not _nan(lo) else signed(delta)


#: a comparison's ``test`` as shown
TESTS = {"mcnemar_exact": "McNemar exact", "paired_t": "paired t"}


def _ci_over(r: Any) -> str:
    """``"44 clips"`` / ``"132 items"``: what the comparison's CI resampled (empty for older cached rows)."""
    unit, k = getattr(r, "ci_unit", None), getattr(r, "clusters", None)
    if not isinstance(unit, str) or _nan(k):
        return ""
    return f"{int(k)} {unit}{'' if int(k) == 1 else 's'}"


def comparison_rows(rows: pd.DataFrame, with_model: bool = False) -> list[dict[str, str]]:
    """Display rows of comparison rows (``evalcore.nightly.compare``): flagged first, then improved, then by key;
    each with a ``_class`` (``flag`` / ``gain`` / ``""``); ``with_model``: a first column naming the model (``a ←
    b`` where the reference run's partner has another name)."""
    if not len(rows):
        return []
    df = rows.copy()
    df["rank_"] = [0 if bool(f) else 1 if bool(g) else 2 for f, g in zip(df["flagged"], df.get("improved", False))]
    keys = ["model"] if with_model and "model" in df.columns else []
    df = df.sort_values(["rank_", *keys, "protocol", "dataset", "condition", "variant", "metric", "group"],
                        kind="stable")
    out = []
    for r in df.itertuples(index=False):
        model = {}
        if keys:
            ref = getattr(r, "reference_model", r.model)
            model = {"model": str(r.model) if ref == r.model else f"{r.model} ← {ref}"}
        out.append({"_class": "flag" if r.rank_ == 0 else "gain" if r.rank_ == 1 else "", **model,
                    "_key": (getattr(r, "model", None), r.protocol, r.dataset, r.condition, r.variant, r.metric,
                             r.group),  # evalcore.nightly.compare.KEYS
                    "protocol": f"{r.protocol} · {r.dataset}", "condition": str(r.condition),
                    "variant": str(r.variant), "metric": str(r.metric) + ("" if r.group == "all" else f" ({r.group})"),
                    "n": str(int(r.n)), "reference": num(r.reference_value), "value": num(r.value),
                    "difference [CI]": interval(r.delta, r.ci_low, r.ci_high), "CI over": _ci_over(r),
                    "test": TESTS.get(getattr(r, "test", None), ""), "p (Holm)": p_value(r.p_adjusted),
                    "flagged": "▼ flagged" if r.rank_ == 0 else "▲ improved" if r.rank_ == 1 else ""})
    return out


def table_html(rows: Iterable[dict[str, str]], columns: list[str] | None = None, caption: str | None = None) -> str:
    """An HTML table of display rows (a row's ``_class`` becomes its ``class``; its ``_href``, a link on its
    ``flagged`` cell, e.g. into the item browser); text escaped."""
    rows = list(rows)
    if not rows:
        return "<p>None.</p>"
    cols = columns or [c for c in rows[0] if not c.startswith("_")]
    head = "".join(f"<th>{header_breakable(html.escape(c))}</th>" for c in cols)
    body = "".join(f'<tr class="{html.escape(r.get("_class", ""))}">'
                   + "".join(f"<td>{_cell(r, c)}</td>" for c in cols) + "</tr>" for r in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f'<div class="table-box"><table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _cell(r: dict[str, str], c: str) -> str:
    text = breakable(html.escape(str(r.get(c, ""))))
    href = r.get("_href")
    return f'<a href="{html.escape(href)}" title="the items whose outcome changed">{text}</a>' if (
        href and c == "flagged") else text


def table_md(rows: Iterable[dict[str, str]], columns: list[str] | None = None) -> str:
    """The same rows as a GitHub-style Markdown table (flagged rows in bold)."""
    rows = list(rows)
    if not rows:
        return "None."
    cols = columns or [c for c in rows[0] if not c.startswith("_")]

    def cell(r: dict[str, str], c: str) -> str:
        v = str(r.get(c, "")).replace("|", "\\|")
        return f"**{v}**" if r.get("_class") == "flag" and v else v

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    return "\n".join(lines + ["| " + " | ".join(cell(r, c) for c in cols) + " |" for r in rows])
