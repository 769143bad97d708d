"""A regression's evidence: for each flagged comparison of a checkpoint against a reference (its previous checkpoint,
the baseline), the items whose outcome changed, as a selection of the checkpoint's item browser
(``runs/<series>/<checkpoint>/browser/sel-vs-<reference>.js``, :func:`evalcore.reports.browser.write_selection`),
which the dashboard links from the flagged row.

An item's outcome is its per-item score in the comparison (:func:`evalcore.nightly.compare.load_scores`: the
metric's value under that condition, option orders averaged; for a listening gap ``correct-<control>``, the per-item
gap); it *changed* when the two runs' values differ. Each changed item carries the line ``f1 (correct): step-2000
1.00 → step-3000 0.000`` on the page. Selections are written for the checkpoints evaluated tonight; an earlier
night's stay and are linked while they exist.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from evalcore.core import storage
from evalcore.core.errors import bounded
from evalcore.nightly import compare
from evalcore.reports.browser import ordinals, write_selection
from evalcore.reports.browser_links import selection_href
from evalcore.reports.tables_html import num

log = logging.getLogger("evalcore")

#: the key of a comparison row (regressions.parquet) a link is attached to
LINK_KEY = ["series", "checkpoint", "reference", *compare.KEYS]


def selection_name(reference: str) -> str:
    return "vs-" + re.sub(r"[^A-Za-z0-9_.-]", "_", str(reference))


def changed(cur_root: str, ref_root: str, rows: pd.DataFrame) -> list[pd.DataFrame]:
    """For each comparison row of ``rows`` (one checkpoint, one reference), the items whose per-item score
    changed: (protocol, dataset, item_id, score, score_ref)."""
    cur = compare.with_gaps(compare.load_scores(cur_root))
    ref = compare.with_gaps(compare.load_scores(ref_root))
    merged = cur.merge(ref, on=compare.KEYS + ["item_id"], suffixes=("", "_ref"))
    out = []
    for r in rows.itertuples(index=False):
        hit = merged[(merged["protocol"] == r.protocol) & (merged["dataset"] == r.dataset)
                     & (merged["condition"] == r.condition) & (merged["variant"] == r.variant)
                     & (merged["metric"] == r.metric) & (merged["group"] == r.group)]
        moved = ~np.isclose(hit["score"].to_numpy(dtype=float), hit["score_ref"].to_numpy(dtype=float))
        out.append(hit[moved][["protocol", "dataset", "item_id", "score", "score_ref"]])
    return out


def entries(cur_root: str, ref_root: str, checkpoint: str, reference: str, rows: pd.DataFrame) -> list[dict]:
    """The selection's entries, one per flagged row (in ``rows``' order): its label, the changed items' positions
    in the checkpoint's browser and, per item, the change."""
    pos = ordinals(cur_root).set_index(["protocol", "dataset", "item_id"])["ordinal"]
    out = []
    for r, items in zip(rows.itertuples(index=False), changed(cur_root, ref_root, rows)):
        where = f"{r.metric} ({r.condition}{'' if r.group == 'all' else ', ' + r.group})"
        ords, changes = [], {}
        for it in items.itertuples(index=False):
            o = pos.get((it.protocol, it.dataset, it.item_id))
            if o is not None:
                ords.append(int(o))
                changes[str(int(o))] = f"{where}: {reference} {num(it.score_ref)} → {checkpoint} {num(it.score)}"
        out.append({"label": f"{r.protocol} · {r.dataset} {where}, {len(ords)} item(s) changed",
                    "items": sorted(ords), "changes": changes})
    return out


def links(root: str, regressions: pd.DataFrame, tonight: set[str], run_root) -> dict[tuple, str]:
    """Write the selections of tonight's checkpoints' flagged comparisons; returns each flagged row's link (by
    :data:`LINK_KEY`), relative to the nightly root, where its checkpoint's browser holds the selection.
    ``run_root(root, series, checkpoint)``: where a checkpoint's run lives. A failure is a warning."""
    hrefs: dict[tuple, str] = {}
    if not len(regressions):
        return hrefs
    flagged = regressions[regressions["flagged"].astype(bool)].sort_values(LINK_KEY, kind="stable")
    for (series, ck, ref), rows in flagged.groupby(["series", "checkpoint", "reference"], sort=True):
        cur_root, name = run_root(root, series, ck), selection_name(ref)
        try:
            if f"{series}/{ck}" in tonight and storage.exists(storage.join(cur_root, "browser", "items.parquet")):
                write_selection(cur_root, name, f"outcome changed against {ref}",
                                entries(cur_root, run_root(root, series, ref), ck, ref, rows))
            if not storage.exists(storage.join(cur_root, "browser", f"sel-{name}.js")):
                continue
        except Exception as e:  # noqa: BLE001 - the dashboard is written without these links
            log.warning("WARNING: nightly: the changed items of %s/%s vs %s were not written (%s)", series, ck, ref,
                        bounded(f"{type(e).__name__}: {e}", 300))
            continue
        base = root.rstrip("/") + "/"
        page = (cur_root[len(base):] if cur_root.startswith(base) else cur_root) + "/items.html"
        for k, r in enumerate(rows.itertuples(index=False)):
            hrefs[tuple(getattr(r, c) for c in LINK_KEY)] = selection_href(page, name, k)
    return hrefs
