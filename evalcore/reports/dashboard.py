"""The nightly's morning page: ``dashboard.html`` (self-contained) and ``dashboard.md`` (terminals, PR comments).

Top to bottom: the night's date and a **Tonight** block (each checkpoint seen tonight with its verdict and
its listening verdict, the night's counts); a **checkpoint × headline metric** matrix per series over the
last checkpoints, each cell coloured by a significant change against the previous checkpoint; the
leaderboard of series that share a suite; the trend plots; the comparisons folded per checkpoint and
reference, flagged rows first; the ledger. Every table wraps inside the page (no horizontal scrolling at
1280 px). Rendered from tables, the night (:class:`~evalcore.core.nightly_outcome.Tonight`, what ``nightly.json`` holds)
and the ledger's records (:class:`~evalcore.core.nightly_outcome.LedgerRecord`) only.
"""

from __future__ import annotations

import html

import pandas as pd

from evalcore.core.nightly_outcome import LedgerRecord, Status, Tonight, Verdict
from evalcore.reports import trends
from evalcore.reports.html import figure_html, page, wrap_tables
from evalcore.reports.tables_html import comparison_rows, num, p_value, signed, table_html, table_md

#: matrix columns: the headline metrics of each protocol kind, each with the comparison its colour is decided on
#: (MCQ under a published rule: the rule's accuracy and, beside it, evalcore's strict reading's)
HEADLINE = {"factual": (("f1_micro", "f1"),), "mcq": (("accuracy", "accuracy"), ("accuracy_strict", "accuracy_strict")),
            "freeform": (("meteor", "meteor"),)}
LAST = 8  # checkpoints per series in the matrix
VERDICT_MARK = {"regressed": "▼", "improved": "▲", "unchanged": "=", "failed": "✗", "waiting": "…", "leased": "⇄",
                "lost": "⇄"}


#: the Tonight block's "why" shows this many characters (a longer reason is cut with a visible mark)
WHY_SHOWN = 300


def _cut(text: str, n: int) -> str:
    """``text`` up to ``n`` characters; a longer one cut, ending in " …"."""
    return text if len(text) <= n else text[: n - 2].rstrip() + " …"


def tonight_block(t: Tonight) -> tuple[str, str]:
    """(HTML, Markdown): tonight's checkpoints and verdicts (a checkpoint's flagged drops counted once, whatever
    they were flagged against; why it got its verdict), the counts, the store's lease mode."""
    c = t.counts
    counts = (f"{c.evaluated} checkpoint(s) evaluated ({c.resumed} resumed), {c.failed} failed, "
              f"{c.waiting} waiting, {c.leased_elsewhere} leased elsewhere · {c.requests_sent} request(s) "
              f"sent to models, {c.requests_committed_earlier} committed earlier, {c.requests_errored} errored")
    rows = [{"_class": {Verdict.REGRESSED: "flag", Verdict.IMPROVED: "gain", Verdict.FAILED: "flag"}.get(v.verdict, ""),
             "checkpoint": str(v.key),
             "verdict": f"{VERDICT_MARK.get(v.verdict, '')}\u00a0{v.verdict}" + (" (resumed)" if v.resumed else ""),
             "listens": v.listening or "—", "flagged drops": str(v.flagged) if v.flagged else "",
             "why": _cut(v.reason or "", WHY_SHOWN)} for v in t.checkpoints]
    none = "Nothing new tonight." if not rows else ""
    warn = ("" if t.store is None else
            f"Leases are not atomic on this store ({t.store}); the fallback is write, wait, read back.")
    exit_line = f"Exit code {t.exit_code}" + (" (a checkpoint evaluated tonight regressed)" if t.exit_code == 3
                                               else "")
    h = (f"<section class=\"tonight\"><h2>Tonight</h2><p>{html.escape(counts)}. {html.escape(exit_line)}.</p>"
         + (f"<p class=\"warn\">{html.escape(warn)}</p>" if warn else "")
         + (f"<p>{none}</p>" if none else table_html(rows)) + "</section>")
    md = (f"## Tonight\n\n{counts}. {exit_line}.\n\n" + (f"{warn}\n\n" if warn else "")
          + (none if none else table_md(rows)) + "\n")
    return h, md


def _changes(regressions: pd.DataFrame) -> dict[tuple, str]:
    """(series, checkpoint, protocol, dataset, variant, metric) → ``flag`` / ``gain`` against the previous one."""
    if not len(regressions):
        return {}
    prev = regressions[regressions["reference_role"].astype(str).str.contains("previous")
                       & (regressions["condition"] == "correct") & (regressions["group"] == "all")]
    out: dict[tuple, str] = {}
    for r in prev.itertuples(index=False):
        key = (r.series, r.checkpoint, r.protocol, r.dataset, r.variant, r.metric)
        if bool(r.flagged):
            out[key] = "flag"
        elif bool(getattr(r, "improved", False)) and out.get(key) != "flag":
            out[key] = "gain"
    return out


def matrix(series: str, hist: pd.DataFrame, regressions: pd.DataFrame) -> tuple[str, str]:
    """(HTML, Markdown): the last checkpoints × each protocol's headline metric (correct audio), value and CI;
    red / green where the change against the previous checkpoint is a flagged drop / a significant gain."""
    rows = hist[(hist["kind"] == "value") & (hist["group"] == "all") & (hist["condition"] == "correct")]
    keep = [rows[(rows["protocol_kind"] == k) & (rows["metric"] == m)] for k, ms in HEADLINE.items() for m, _ in ms]
    rows = pd.concat(keep) if keep else rows
    if not len(rows):
        return "", ""
    changes = _changes(regressions)
    cps = list(rows.sort_values("position")["checkpoint"].drop_duplicates())[-LAST:]
    cols = sorted({(r.protocol, r.dataset, r.variant, r.metric, r.protocol_kind) for r in rows.itertuples()})
    names = [f"{p} · {d}" + ("" if v == "default" else f" ({v})") + f" {m}" for p, d, v, m, _ in cols]
    body, md_rows = [], []
    for ck in cps:
        cells, md_cells = [], []
        for p, d, v, m, kind in cols:
            hit = rows[(rows["checkpoint"] == ck) & (rows["protocol"] == p) & (rows["dataset"] == d)
                       & (rows["variant"] == v) & (rows["metric"] == m)]
            if not len(hit):
                cells.append("<td>—</td>")
                md_cells.append("—")
                continue
            r = hit.iloc[0]
            text = f"{num(r['value'])} [{num(r['ci_low'])}, {num(r['ci_high'])}]"
            cls = changes.get((series, ck, p, d, v, dict(HEADLINE[kind])[m]), "")
            cells.append(f'<td class="{cls}">{html.escape(text)}</td>')
            md_cells.append({"flag": f"**{text} ▼**", "gain": f"{text} ▲"}.get(cls, text))
        body.append(f"<tr><th>{html.escape(ck)}</th>{''.join(cells)}</tr>")
        md_rows.append(f"| {ck} | " + " | ".join(md_cells) + " |")
    head = "<th>checkpoint</th>" + "".join(f"<th>{html.escape(n)}</th>" for n in names)
    caption = (f"{series}: headline metric per checkpoint (correct audio, 95% CI); red: a flagged drop against the "
               "previous checkpoint, green: a significant gain")
    h = wrap_tables(f"<table class=\"matrix\"><caption>{html.escape(caption)}</caption><thead><tr>{head}</tr></thead>" \
        f"<tbody>{''.join(body)}</tbody></table>")
    md = (f"{caption}\n\n| checkpoint | " + " | ".join(names) + " |\n|" + "---|" * (len(names) + 1) + "\n"
          + "\n".join(md_rows))
    return h, md


def comparisons(regressions: pd.DataFrame, tonight: set[str], links: dict[tuple, str] | None = None) -> tuple[str, str]:
    """(HTML, Markdown): every checkpoint's comparisons folded per reference, newest first; tonight's open.
    ``links``: (series, checkpoint, reference, model, protocol, dataset, condition, variant, metric, group) → a
    flagged row's link to the checkpoint's item browser, filtered to the items whose outcome changed."""
    if not len(regressions):
        return "<h2>Comparisons</h2><p>None yet.</p>", "## Comparisons\n\nNone yet.\n"
    h, md = ["<h2>Comparisons</h2>"], ["## Comparisons"]
    groups = regressions.groupby(["series", "checkpoint", "reference", "reference_role"], sort=False)
    order = sorted(groups.groups, key=lambda k: (-int(groups.get_group(k)["flagged"].astype(bool).sum() > 0),
                                                 k[0], k[1]), reverse=False)
    for key in order:
        series, ck, ref, role = key
        g = groups.get_group(key)
        nf = int(g["flagged"].astype(bool).sum())
        worst = g.loc[g["delta"].idxmin()] if nf else None
        title = (f"{series}/{ck} vs {ref} ({role}): {nf} of {len(g)} flagged"
                 + (f"; largest drop {signed(worst['delta'])} ({worst['protocol']} {worst['metric']}, "
                    f"{worst['condition']}, p {p_value(worst['p_adjusted'])})" if worst is not None else ""))
        rows = [{**r, "_href": (links or {}).get((series, ck, ref, *r["_key"]))} for r in comparison_rows(g)]
        opened = " open" if nf and f"{series}/{ck}" in tonight else ""
        h.append(f"<details{opened}><summary>{html.escape(title)}</summary>{table_html(rows)}</details>")
        md.append(f"<details><summary>{title}</summary>\n\n{table_md([r for r in rows if r['_class']] or rows[:5])}"
                  "\n\n</details>")
    return "\n".join(h), "\n\n".join(md) + "\n"


def leaderboard_section(board: pd.DataFrame) -> tuple[str, str]:
    """(HTML, Markdown): series sharing a suite, their latest checkpoints against each metric's leader."""
    if not len(board):
        return "", ""
    rows = [{"_class": "" if r.series == r.leader else ("flag" if (r.ci_high or 0) < 0 else ""),
             "series": f"{r.series}/{r.checkpoint}", "protocol": f"{r.protocol} · {r.dataset}",
             "metric": r.metric + ("" if r.variant == "default" else f" ({r.variant})"), "value": num(r.value),
             "leader": "leader" if r.series == r.leader else f"{r.leader} {num(r.leader_value)}",
             "vs leader [CI]": "" if r.series == r.leader else f"{signed(r.delta)} [{signed(r.ci_low)}, "
                                                               f"{signed(r.ci_high)}]",
             "p (Holm)": "" if r.series == r.leader else p_value(r.p_adjusted),
             "shared items": "" if r.n is None or pd.isna(r.n) else str(int(r.n))} for r in board.itertuples()]
    note = ("Latest checkpoint of each series that shares a suite fingerprint; each metric's leader is the series "
            "with the highest mean, the others are compared with it item by item over shared items (paired "
            "bootstrap CI, Holm-adjusted p).")
    fig = trends.leaderboard_figure(board)
    return (f"<h2>Leaderboard</h2><p>{html.escape(note)}</p>{table_html(rows)}"
            + figure_html(fig, "Latest checkpoint of each series, per metric (correct audio; values over all items "
                               "each scored)"),
            f"## Leaderboard\n\n{note}\n\n{table_md(rows)}\n")


def ledger_rows(records: list[LedgerRecord]) -> list[dict[str, str]]:
    recs = sorted(records, key=lambda r: r.key)
    return [{"_class": "flag" if r.status is Status.FAILED else "", "series": r.series, "checkpoint": r.checkpoint,
             "status": str(r.status), "attempts": str(r.attempts), "finished": r.finished or "",
             "reason": (r.reason or "")[:200]} for r in recs]


def render(tonight: Tonight, regressions: pd.DataFrame, hist: pd.DataFrame, records: list[LedgerRecord],
           notes: list[str], board: pd.DataFrame, links: dict[tuple, str] | None = None) -> tuple[str, str]:
    """(dashboard.html, dashboard.md); ``links``: the flagged rows' links into the item browser
    (:func:`comparisons`)."""
    title = f"Nightly: {tonight.name} — {tonight.date[:10]}"
    h, md = [f"<h1>{html.escape(title)}</h1>"], [f"# {title}"]
    th, tm = tonight_block(tonight)
    h.append(th)
    md.append(tm)
    if notes:
        h.append("<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
        md.append("## Notes\n\n" + "\n".join(f"- {n}" for n in notes))
    for series, g in (hist.groupby("series", sort=True) if len(hist) else []):
        mh, mm = matrix(str(series), g, regressions)
        if mh:
            h.append(f"<h2>{html.escape(str(series))}: checkpoints × headline metrics</h2>{mh}")
            md.append(f"## {series}: checkpoints × headline metrics\n\n{mm}")
    lh, lm = leaderboard_section(board)
    if lh:
        h.append(lh)
        md.append(lm)
    for series, g in (hist.groupby("series", sort=True) if len(hist) else []):
        sh, sm = trends.series_section(str(series), g)
        h.append(sh)
        md.append(sm)
    ch, cm = comparisons(regressions, {str(v.key) for v in tonight.checkpoints}, links)
    h.append(ch)
    md.append(cm)
    led = ledger_rows(records)
    h.append("<h2>Checkpoints</h2>" + table_html(led))
    md.append("## Checkpoints\n\n" + table_md(led))
    return page(title, "\n".join(h)), "\n\n".join(md) + "\n"
