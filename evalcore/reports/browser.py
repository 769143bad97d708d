"""``items.html``: a run's item browser, a static page beside ``report.html`` that opens from the run's folder (a
local root, a copy, a bucket download) without a server, and fetches nothing from elsewhere.

One row per item (protocol instance × dataset × item): the question, its options and ground truth, and for each
model (prompt variant, option order) the answers under every audio condition side by side, each with its outcome,
the judge's reading (the option, the labels), its scores, its error row if any, and a player for the clip as the
model heard it (written by :mod:`evalcore.pipeline.browse`). Filters: protocol, dataset, task, model, condition,
outcome, and the evidence of not listening (:mod:`evalcore.reports.browser_rows`); sorting by that evidence.

What is written under the run root (the page's own files do not grow with the run; its data do, in shards):

* ``items.html``, ``browser/items.js``, ``browser/items.css`` — the page (``browser_assets/``, plain JS);
* ``browser/meta.js`` — the facets, the counts, the shard sizes;
* ``browser/index/NNNNN.js`` — per :data:`PER_INDEX` items, a few integer codes per item (its protocol, dataset,
  task, and one code per request and per sign of not listening): what filters and sorts read;
* ``browser/data/NNNNN.js`` — per :data:`PER_DATA` items, everything a page shows of them;
* ``browser/items.parquet`` — (protocol, dataset, item_id) → the item's position, for selections
  (:func:`write_selection`: the nightly's changed items);
* ``browser/sel-verdicts.js`` — where a judge follows a published rule, the items whose verdict by that rule
  differs from evalcore's strict reading, an entry per cell (:func:`verdict_entries`, linked from the report by
  :func:`evalcore.reports.browser_links.verdicts_href`); each such answer carries the note on the page too.

Every data file is a script calling ``EVB.<kind>(…)`` with JSON: Chromium does not let a page from ``file://``
fetch() files beside it, but does let it load scripts. Numbers are formatted as the report formats them
(:func:`evalcore.reports.tables_html.fmt`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Iterable

import numpy as np
import pandas as pd
import pyarrow as pa

from evalcore.core import storage
from evalcore.reports import browser_rows as rows_
from evalcore.reports.browser_links import PAGE, VERDICTS, verdicts_key
from evalcore.reports.tables_html import fmt
from evalcore.kinds.base import kind_of
from evalcore.core.schema import CONDITIONS

PER_DATA = 50  #: items per data shard (a page shows 25)
PER_INDEX = 5_000  #: items per index shard
MAX_TEXT = 4_000  #: characters of an answer kept on the page (the rest is in the run's shards)
NOT_LOADED = "(not loaded)"  #: the protocol of an item that failed to load (it has no protocol instance)


@dataclass
class BrowserInput:
    """What the page is made of: the run's requests (one row each, with the clip each played), its items, the
    item error rows, the per-item metric columns, what each model hears (a line each) and the run's name."""

    requests: pd.DataFrame
    items: pd.DataFrame
    item_errors: list[dict] = field(default_factory=list)
    metric_columns: list[str] = field(default_factory=list)
    specs: dict[str, str] = field(default_factory=dict)
    name: str = ""
    line: str = ""
    #: (dataset, item id) → its paraphrases as the paraphrase conditions asked them: (condition, question, options)
    paraphrases: dict[tuple[str, str], list[tuple[str, str, list[str]]]] = field(default_factory=dict)


def _js(call: str, *args: Any) -> str:
    return f"EVB.{call}(" + ",".join(json.dumps(a, ensure_ascii=False, separators=(",", ":"), default=str)
                                    for a in args) + ");\n"


def _codes(values: pd.Series, names: list[str]) -> np.ndarray:
    return pd.Categorical(values.astype(object), categories=names).codes.astype(np.int64)


def _order(values: pd.Series, first: Iterable[str] = ()) -> list[str]:
    seen = [str(v) for v in pd.unique(values.dropna().astype(object))]
    return [v for v in first if v in seen] + sorted(v for v in seen if v not in set(first))


def item_table(req: pd.DataFrame, items: pd.DataFrame, item_errors: list[dict]) -> pd.DataFrame:
    """One row per (protocol instance, dataset, item) in page order, with the item's own fields and ``ordinal``.
    Page order: by protocol instance and dataset, and within them the items with an answer under the correct audio
    before those without (every such request errored — a clip that does not decode —, or the item did not load),
    each part by item id: the page opens on answers to compare, not on a run's broken clips (the demo's four, first
    by id, were answered only without audio)."""
    keys = req[["protocol", "protocol_kind", "dataset", "item_id", "task", "question"]].drop_duplicates(
        ["protocol", "dataset", "item_id"])
    info = items.drop_duplicates(["dataset", "item_id"]).drop(columns=["protocol"], errors="ignore")
    out = keys.merge(info, on=["dataset", "item_id"], how="left", suffixes=("_req", ""))
    for c in ("task", "question"):
        if f"{c}_req" in out.columns:
            out[c] = out[c].where(out[c].notna(), out[f"{c}_req"]) if c in out.columns else out[f"{c}_req"]
    out["item_error"] = None
    if item_errors:
        bad = pd.DataFrame([{"protocol": e.get("protocol") or NOT_LOADED, "protocol_kind": e.get("protocol"),
                             "dataset": e.get("dataset"), "item_id": e.get("item_id") or "(no id)",
                             "item_error": [e.get("error_stage"), e.get("error_class"), e.get("error")]}
                            for e in item_errors])
        out = pd.concat([out, bad], ignore_index=True)
    answered = req.loc[req["error"].isna() & (req["condition"] == "correct"),
                       ["protocol", "dataset", "item_id"]].drop_duplicates()
    out = out.merge(answered.assign(_unanswered=False), on=["protocol", "dataset", "item_id"], how="left")
    out["_unanswered"] = out["_unanswered"].isna()
    out = out.sort_values(["protocol", "dataset", "_unanswered", "item_id"], kind="stable").drop(
        columns="_unanswered").reset_index(drop=True)
    out["ordinal"] = np.arange(len(out), dtype=np.int64)
    return out


class Facets:
    """The names behind the page's integer codes, and the codes of one request or one sign of evidence."""

    def __init__(self, req: pd.DataFrame, items: pd.DataFrame) -> None:
        self.protocols = _order(items["protocol"])
        self.datasets = _order(items["dataset"])
        self.tasks = _order(items["task"]) if "task" in items.columns else []
        self.models = _order(req["model"])
        self.variants = _order(req["variant"], ("default",))
        present = _order(req["condition"])
        self.conditions = [c for c in CONDITIONS if c in present] + [c for c in present if c not in CONDITIONS]
        self.outcomes = list(rows_.OUTCOMES)

    def request_codes(self, df: pd.DataFrame) -> np.ndarray:
        """((model × variants + variant) × conditions + condition) × outcomes + outcome, per request."""
        nv, nc, no = len(self.variants), len(self.conditions), len(self.outcomes)
        return (((_codes(df["model"], self.models) * nv + _codes(df["variant"], self.variants)) * nc
                 + _codes(df["condition"], self.conditions)) * no + _codes(df["outcome"], self.outcomes))

    def evidence_codes(self, ev: pd.DataFrame) -> np.ndarray:
        nv, nc = len(self.variants), len(self.conditions)
        return ((_codes(ev["model"], self.models) * nv + _codes(ev["variant"], self.variants)) * nc
                + _codes(ev["condition"], self.conditions))

    def as_json(self) -> dict[str, list[str]]:
        return {"protocols": self.protocols, "datasets": self.datasets, "tasks": self.tasks, "models": self.models,
                "variants": self.variants, "conditions": self.conditions, "outcomes": self.outcomes}


def _per_item(ordinals: np.ndarray, values: np.ndarray, n: int) -> list[list[int]]:
    """``values`` grouped by ``ordinals`` into ``n`` lists (empty where an item has none)."""
    order = np.argsort(ordinals, kind="stable")
    bounds = np.searchsorted(ordinals[order], np.arange(n + 1))
    vals = values[order].tolist()
    return [vals[bounds[i]:bounds[i + 1]] for i in range(n)]


def _present(v: Any) -> bool:
    return v is not None and v is not pd.NA and not (isinstance(v, float) and v != v)


def _shown(kind: str, metrics: list[str]) -> tuple[str, ...] | list[str]:
    """The per-item columns shown as a request's scores: its kind's (:attr:`ProtocolKind.shown_columns`), every
    metric column of the run for a kind scored by text metrics, else none."""
    spec = kind_of(kind)
    if spec is None:
        return ()
    return spec.shown_columns or (metrics if spec.text_metrics else ())


def _cells(req: pd.DataFrame, fac: Facets, metrics: list[str], why: dict[tuple, str]) -> list[dict[str, Any]]:
    """Each request as the page's cell: outcome, answer, text, scores, error, clip."""
    kinds = req["protocol_kind"].astype(str).tolist()
    shown = {k: [c for c in _shown(k, metrics) if c in req.columns] for k in set(kinds)}
    col = {c: req[c].tolist() if c in req.columns else [None] * len(req)
           for c in ("parsed_index", "extracted", "options", "text", "error", "error_stage", "error_class", "clip",
                     "clip_note", "seconds", "verdict_note")}
    score_vals = {c: req[c].tolist() for c in {c for v in shown.values() for c in v}}
    outs = _codes(req["outcome"], fac.outcomes).tolist()
    rids = req["request_id"].tolist()
    keys = zip(req["ordinal"].tolist(), req["model"].tolist(), req["variant"].tolist(),
               req["option_order"].tolist(), req["condition"].tolist())
    cells = []
    for i, (kind, key) in enumerate(zip(kinds, keys)):
        text = col["text"][i]
        c: dict[str, Any] = {"u": outs[i], "r": rids[i]}
        err = col["error"][i] if _present(col["error"][i]) else None
        a = rows_.answer_text(col["parsed_index"][i], col["extracted"][i], col["options"][i], kind)
        if a:
            c["a"] = a
        if _present(col["verdict_note"][i]) and err is None:
            c["vd"] = col["verdict_note"][i]
        if isinstance(text, str) and text:
            c["x"] = text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f" … ({len(text):,} characters)"
        s = [[m, fmt(score_vals[m][i])] for m in shown[kind] if _present(score_vals[m][i])]
        if s and err is None:
            c["s"] = s
        if err is not None:
            c["e"] = [str(col["error_stage"][i]), str(col["error_class"][i]), str(err)]
        if _present(col["clip"][i]):
            c["au"] = col["clip"][i]
            if _present(col["seconds"][i]):
                c["sec"] = f"{col['seconds'][i]:.3f}"
        if _present(col["clip_note"][i]) and not (err is not None and col["error_stage"][i] == "decode"):
            c["an"] = col["clip_note"][i]
        if key in why:
            c["ev"] = why[key]
        cells.append(c)
    return cells


def _items_json(items: pd.DataFrame, req: pd.DataFrame, cells: list[dict], fac: Facets,
                n_evidence: list[int], paraphrases: dict | None = None) -> list[dict[str, Any]]:
    """Every item as the page's record, its requests grouped by (model, variant, option order)."""
    out = []
    canon = items["options"].tolist() if "options" in items.columns else [None] * len(items)
    for row, opts, nev in zip(items.itertuples(index=False), canon, n_evidence):
        it: dict[str, Any] = {"i": int(row.ordinal), "id": row.item_id, "d": fac.datasets.index(str(row.dataset))
                              if row.dataset in fac.datasets else -1, "p": fac.protocols.index(str(row.protocol)),
                              "t": fac.tasks.index(row.task) if getattr(row, "task", None) in fac.tasks else -1,
                              "g": []}
        for k, v in (("q", getattr(row, "question", None)), ("ref", getattr(row, "reference", None)),
                     ("cat", getattr(row, "category", None)), ("dif", getattr(row, "difficulty", None)),
                     ("err", row.item_error)):
            if _present(v):
                it[k] = v
        if isinstance(opts, (list, tuple, np.ndarray)) and len(opts):  # an item that failed to load has none (NaN)
            it["o"] = list(opts)
            ok = getattr(row, "correct_option", None)
            if ok is not None and ok == ok:
                it["ok"] = int(ok)
        labels = getattr(row, "labels", None)
        if isinstance(labels, (list, tuple, np.ndarray)) and len(labels):
            it["l"] = list(labels)
        if nev:
            it["nev"] = nev
        if (para := (paraphrases or {}).get((str(row.dataset), str(row.item_id)))):
            it["pp"] = [[c, q, list(o)] for c, q, o in para]  # the paraphrase conditions' wording
        out.append(it)
    groups: dict[tuple, list] = {}
    conds = {c: i for i, c in enumerate(fac.conditions)}
    models = {m: i for i, m in enumerate(fac.models)}
    variants = {v: i for i, v in enumerate(fac.variants)}
    for o, m, v, order, cond, shown, ci, cell in zip(req["ordinal"].tolist(), req["model"].tolist(),
                                                      req["variant"].tolist(), req["option_order"].tolist(),
                                                      req["condition"].tolist(), req["options"].tolist(),
                                                      req["correct_index"].tolist(), cells):
        key = (o, m, v, order)
        g = groups.get(key)
        if g is None:
            canon_opts = out[o].get("o")
            shown_opts = list(shown) if shown is not None else None
            g = [models[m], variants[v], int(order or 0), None if shown_opts == canon_opts else shown_opts,
                 None if ci is None or ci != ci else int(ci), [None] * len(fac.conditions)]
            groups[key] = g
            out[o]["g"].append(g)
        g[5][conds[cond]] = cell
    return out


def write(root: str, inp: BrowserInput, out: storage.RunStorage | None = None) -> str:
    """Write the browser of the run at ``root`` (``items.html`` and ``browser/``); returns the page's URI."""
    out = out or storage.RunStorage(root)
    req = rows_.label(inp.requests)
    req["verdict_note"] = rows_.verdict_notes(req)
    items = item_table(req, inp.items, inp.item_errors)
    fac = Facets(req, items)
    req = req.merge(items[["protocol", "dataset", "item_id", "ordinal"]], on=["protocol", "dataset", "item_id"])
    req = req.assign(_m=_codes(req["model"], fac.models), _v=_codes(req["variant"], fac.variants)).sort_values(
        ["ordinal", "_m", "_v", "option_order"], kind="stable").drop(columns=["_m", "_v"]).reset_index(drop=True)
    ev = rows_.evidence(req).merge(items[["protocol", "dataset", "item_id", "ordinal"]],
                                   on=["protocol", "dataset", "item_id"])
    n = len(items)
    ords = req["ordinal"].to_numpy(dtype=np.int64)
    r_codes = _per_item(ords, fac.request_codes(req), n)
    e_codes = _per_item(ev["ordinal"].to_numpy(dtype=np.int64), fac.evidence_codes(ev), n)
    why = {k: w for k, w in zip(zip(ev["ordinal"].tolist(), ev["model"].tolist(), ev["variant"].tolist(),
                                    ev["option_order"].tolist(), ev["condition"].tolist()), ev["why"].tolist())}
    records = _items_json(items, req, _cells(req, fac, inp.metric_columns, why), fac, [len(e) for e in e_codes],
                          inp.paraphrases)

    base = storage.join(root, "browser")
    written: set[str] = set()

    def put(rel: str, text: str) -> None:
        out.write_text(storage.join(base, rel), text)
        written.add(rel)

    p_codes = _codes(items["protocol"], fac.protocols).tolist()
    d_codes = _codes(items["dataset"], fac.datasets).tolist()
    t_codes = _codes(items["task"], fac.tasks).tolist() if fac.tasks else [-1] * n
    flags = [0 if e is None else 1 for e in items["item_error"]]
    for k, lo in enumerate(range(0, max(n, 1), PER_INDEX)):
        hi = min(n, lo + PER_INDEX)
        put(f"index/{k:05d}.js", _js("index", k, {"p": p_codes[lo:hi], "d": d_codes[lo:hi], "t": t_codes[lo:hi],
                                                  "f": flags[lo:hi], "r": r_codes[lo:hi], "e": e_codes[lo:hi]}))
    for k, lo in enumerate(range(0, max(n, 1), PER_DATA)):
        put(f"data/{k:05d}.js", _js("data", k, records[lo:lo + PER_DATA]))
    present = set(req["outcome"]) | ({"error"} if any(flags) else set())
    meta = {"name": inp.name, "line": inp.line, "items": n, "requests": len(req), "per_data": PER_DATA,
            "per_index": PER_INDEX, "data_shards": max(1, -(-n // PER_DATA)), "index_shards": max(1, -(-n // PER_INDEX)),
            **fac.as_json(), "present_outcomes": [o for o in fac.outcomes if o in present], "specs": inp.specs,
            "evidence": int(sum(1 for e in e_codes if e))}
    put("meta.js", _js("meta", meta))
    assets = resources.files("evalcore.reports") / "browser_assets"
    for name in ("items.js", "items.css"):
        put(name, (assets / name).read_text(encoding="utf-8"))
    out.write_parquet(pa.Table.from_pandas(items[["protocol", "dataset", "item_id", "ordinal"]], preserve_index=False),
                      storage.join(base, "items.parquet"))
    for sub in ("index", "data"):  # shards of an earlier, larger write of this run's page
        try:
            found = storage.list_files(storage.join(base, sub), ".js")
        except FileNotFoundError:  # an S3 prefix just deleted can still list as a directory
            found = []
        for uri in found:  # listed as absolute paths: by name
            if f"{sub}/{uri.rsplit('/', 1)[-1]}" not in written:
                out.delete(storage.join(base, sub, uri.rsplit("/", 1)[-1]))
    differ = verdict_entries(req)
    if differ:
        write_selection(root, VERDICTS, "published rule and strict reading differ", differ, out)
    elif storage.exists(storage.join(base, f"sel-{VERDICTS}.js")):  # an earlier write of this run's page had some
        out.delete(storage.join(base, f"sel-{VERDICTS}.js"))
    page = (assets / "items.html").read_text(encoding="utf-8").replace("$NAME", _escape(inp.name or "run"))
    uri = storage.join(root, PAGE)
    out.write_text(uri, page)
    return uri


CELL = ["protocol", "dataset", "model", "variant", "condition"]


def verdict_entries(req: pd.DataFrame) -> list[dict[str, Any]]:
    """The :data:`~evalcore.reports.browser_links.VERDICTS` selection: per cell (protocol instance, dataset, model,
    variant, condition) with any, the items (positions) whose verdict by a published rule differs from evalcore's
    strict reading in some option order, each with what differs. ``req``: requests with ``ordinal`` and
    ``verdict_note``."""
    hit = req[req["verdict_note"].notna() & req["error"].isna()]
    orders = req.groupby(["protocol", "dataset", "item_id"])["option_order"].nunique()
    out = []
    for key, g in hit.groupby(CELL, sort=True, dropna=False):
        changes = {}
        for o, gg in g.groupby("ordinal", sort=True):
            note = "; ".join(dict.fromkeys(gg["verdict_note"]))
            first = gg.iloc[0]
            if orders.get((first["protocol"], first["dataset"], first["item_id"]), 1) > 1:
                note += " (option order " + ", ".join(str(int(x)) for x in sorted(gg["option_order"])) + ")"
            changes[str(int(o))] = f"{key[2]}, {key[4]} audio: {note}"
        items = sorted(int(o) for o in changes)
        out.append({"key": verdicts_key(*key), "items": items, "changes": changes,
                    "label": f"{key[0]} · {key[1]} · {key[2]}, {key[4]} audio: {len(items)} item(s)"})
    return out


def _escape(text: str) -> str:
    import html

    return html.escape(text)


def ordinals(root: str) -> pd.DataFrame:
    """(protocol, dataset, item_id, ordinal) of the items of the run's browser."""
    return storage.read_parquet(storage.join(root, "browser", "items.parquet")).to_pandas()


def write_selection(root: str, name: str, label: str, entries: list[dict[str, Any]],
                    out: storage.RunStorage | None = None) -> str:
    """``browser/sel-<name>.js``: named sets of the run's items, each ``{"label", "items": [ordinal, …],
    "changes": {ordinal: text}}``, opened by ``items.html#sel=<name>:<entry>``; returns its URI."""
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ValueError(f"selection name {name!r}: letters, digits, - _ . only")
    uri = storage.join(root, "browser", f"sel-{name}.js")
    (out or storage.RunStorage(root)).write_text(uri, _js("selection", name, {"label": label, "entries": entries}))
    return uri
