"""Committed shards: how a run's outputs are written so that a killed run can resume without loss or repeats.

Layout under the run root::

    items/part-00000.parquet         item_errors/part-00000.parquet     _commits/items.json
    responses/<key>.parquet          judgments/<key>.parquet            _commits/shard-<key>.json

A shard holds the rows (one per chunk) of *complete* requests only: every chunk of a request is in
the same shard. ``<key>`` is derived from its content (a hash of its ``request_id``/``chunk_index``
pairs). The commit is atomic: the data files are written first (locally to a hidden temporary name,
then renamed; on S3 each a single PUT, stored whole or not at all), and the small marker
``_commits/shard-<key>.json`` last. A data file without a marker is not part of the run: readers skip it and
:func:`clean_uncommitted` deletes it. A marker that is not whole (empty, cut, not the JSON of a marker: written by
an older evalcore whose S3 writes could be cut, or damaged by hand) counts as absent: readers skip it with a
warning and :func:`clean_uncommitted` deletes it, so a resume runs its requests again. The items stage is committed
the same way by ``_commits/items.json``.

Each marker records the run *attempt* that committed it (0 for the first, +1 for every
``--resume``). A resumed run may run a committed request again (an error row of a class it
retries, e.g. ``transient``): its new rows are committed by the new attempt, and readers keep, for
every request, only the rows of the latest attempt that committed it — nothing is rewritten or
deleted, so a kill at any point leaves either the old rows or the new ones.

Each marker also holds its shard's *index*: per row, ``request_id``, ``chunk_index``, ``n_chunks``,
``error_stage`` and ``error_class`` (``error_stage`` set only on error rows). A resumed run learns from
the markers alone which requests are committed and which of them errored (:func:`load_index`), and
reads in full only the shards of the requests it runs again (:func:`load_requests`). Markers written
before the index existed are indexed from their shard's files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from evalcore.core import storage
from evalcore.core.item_table import ItemTable
from evalcore.pipeline import attempts
from evalcore.core.errors import TRANSIENT, bounded, class_of
from evalcore.core.schema import ERRORS, JUDGMENT, RESPONSE, conform

log = logging.getLogger("evalcore")

COMMITS = "_commits"
ITEMS_MARKER = "items.json"
SHARD_ROWS = 5000  # rows per shard at most (a shard is committed once it has this many rows ...)
COMMIT_SECONDS = 10.0  # ... or once this long has passed since the last commit
WORKER_SHARD_ROWS = (64, 2048)  # rows per shard a commit task writes at most, about (pipeline/committer.py): from, to
SHARD_COLUMN = "shard"  # in the commit stage's output: the key of the shard a worker committed the row in
ROWS_COLUMN = "rows"  # in the commit stage's output: how many committed rows a tally row stands for
FORMAT = 1
_JUDGMENT_ONLY = [f.name for f in JUDGMENT if f.name not in RESPONSE.names]


class RunStateError(RuntimeError):
    """The run root cannot be used as asked (unfinished run, damaged commit, changed config)."""


def _commits(root: str, name: str = "") -> str:
    return storage.join(root, COMMITS, name) if name else storage.join(root, COMMITS)


def shard_key(rows: Iterable[dict], attempt: int = 0) -> str:
    """A content-derived shard name: a hash of the sorted (request_id, chunk_index) pairs (and the attempt
    after the first, so a request run again never overwrites its earlier shard)."""
    ids = sorted(f"{r['request_id']}:{r.get('chunk_index') or 0}" for r in rows)
    if attempt:
        ids.append(f"attempt:{attempt}")
    return hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()[:24]


def commit_shard(out: storage.RunStorage, rows: list[dict], attempt: int = 0) -> str:
    """Write ``rows`` (complete requests) as one shard, data first, marker last; returns its key.
    Every error reason is stored bounded (:func:`evalcore.core.errors.bounded`)."""
    rows = sorted(rows, key=lambda r: (r["request_id"], r.get("chunk_index") or 0))
    rows = [{**r, "error": bounded(r["error"])} if r.get("error") is not None else r for r in rows]
    key = shard_key(rows, attempt)
    files = {"responses": f"responses/{key}.parquet", "judgments": f"judgments/{key}.parquet"}
    out.write_parquet(conform(rows, RESPONSE), storage.join(out.root, files["responses"]))
    out.write_parquet(conform(rows, JUDGMENT), storage.join(out.root, files["judgments"]))
    attempts.check_current(out.root, attempt)  # a later attempt took the run over: no marker, the stream stops
    marker = {"format": FORMAT, "key": key, "rows": len(rows), "requests": len({r["request_id"] for r in rows}),
              "files": files, "attempt": attempt, "index": shard_index(rows)}
    out.write_text(_commits(out.root, f"shard-{key}.json"), json.dumps(marker, sort_keys=True))
    return key


_INDEX = ("request_id", "chunk_index", "n_chunks", "error_stage", "error_class")


def shard_index(rows: list[dict]) -> dict[str, list]:
    """A shard's index, column by column (see the module docstring): what a resume needs of its rows."""
    rows = [_index_row(r) for r in rows]
    return {k: [r[k] for r in rows] for k in _INDEX}


def _index_row(r: dict) -> dict:
    failed = r.get("error") is not None
    return {"request_id": r["request_id"], "chunk_index": int(r.get("chunk_index") or 0),
            "n_chunks": int(r.get("n_chunks") or 1), "error_stage": (r.get("error_stage") or "") if failed else None,
            "error_class": r.get("error_class") if failed else None}


def worker_shard_rows(to_run: int) -> int:
    """Rows per shard the commit tasks write at most for a run of ``to_run`` requests: about 1/32 of the run, within
    :data:`WORKER_SHARD_ROWS` — a long run commits in a few hundred shards (and, whatever its size, its first block
    at once and then every 10 s at least: :mod:`evalcore.pipeline.committer`)."""
    low, high = WORKER_SHARD_ROWS
    return max(low, min(high, to_run // 32))


def _settings(batch: pa.Table, root: str, attempt: int = 0, s3: dict | None = None,
              read_timeout_s: float | None = None) -> storage.StorageSettings:
    return storage.StorageSettings.of(s3, read_timeout_s)


@storage.scoped(_settings)  # the run's S3 options and read deadline, which a worker process does not see otherwise
def commit_batch(batch: pa.Table, root: str, attempt: int = 0, s3: dict | None = None,
                 read_timeout_s: float | None = None) -> pa.Table:
    """A commit task's work on a Ray worker (:mod:`evalcore.pipeline.committer`): the batch's complete requests
    (every chunk present) committed as one shard (:func:`commit_shard`). Returns what the driver counts: the committed rows as a few tally rows (one per
    model, failing stage and first-chunk-or-not; column ``rows`` says how many rows each stands for,
    column ``shard`` holds the shard's key, the other columns null), then the rows of requests missing some chunks
    whole, with ``shard`` and ``rows`` null, for the driver's :class:`ShardWriter` to complete and commit.

    A batch's answer stays a few KiB however large the shard (a row per committed row cost some 450 KiB per 2,048
    rows, sent through the object store to the driver)."""
    ids = batch.column("request_id").to_pylist()
    n_chunks = [int(n or 1) for n in batch.column("n_chunks").to_pylist()]
    seen: dict[str, int] = {}
    for rid in ids:
        seen[rid] = seen.get(rid, 0) + 1
    whole = [seen[rid] >= n for rid, n in zip(ids, n_chunks)]
    done = [i for i, w in enumerate(whole) if w]
    complete = batch.take(pa.array(done, pa.int64()))
    key = commit_shard(storage.RunStorage(root), complete.to_pylist(), attempt) if done else None
    tally = _tally(complete)
    summary = pa.Table.from_arrays([pa.array([t[f.name] for t in tally], f.type) if f.name in TALLY_KEYS
                                    else pa.nulls(len(tally), f.type) for f in batch.schema], schema=batch.schema)
    rest = batch.filter(pa.array([not w for w in whole], pa.bool_()))
    out = pa.concat_tables([summary, rest])
    out = out.append_column(pa.field(SHARD_COLUMN, pa.string()),
                            pa.array([key] * len(tally) + [None] * rest.num_rows, pa.string()))
    return out.append_column(pa.field(ROWS_COLUMN, pa.int64()),
                             pa.array([t[ROWS_COLUMN] for t in tally] + [None] * rest.num_rows, pa.int64()))


TALLY_KEYS = ("model", "error_stage", "chunk_index")  # what the driver's counts (console.StageTally) tell apart


def _tally(rows: pa.Table) -> list[dict]:
    """Committed ``rows`` counted by :data:`TALLY_KEYS` (chunk_index: 0 for a request's first chunk, else 1)."""
    counts: dict[tuple, int] = {}
    first = [not c for c in rows.column("chunk_index").to_pylist()]
    for key in zip(rows.column("model").to_pylist(), rows.column("error_stage").to_pylist(), first):
        counts[key] = counts.get(key, 0) + 1
    return [{"model": m, "error_stage": e, "chunk_index": 0 if f else 1, ROWS_COLUMN: n}
            for (m, e, f), n in counts.items()]


@dataclass
class ShardWriter:
    """Collects judged rows as they stream in and commits complete requests as shards.

    A request is complete once all its ``n_chunks`` chunks arrived. Complete requests are committed
    when ``shard_rows`` of them are waiting or ``every_s`` seconds passed since the last commit, and
    by :meth:`close`. Used as a context manager, complete requests are committed even when the
    stream fails; :meth:`close` turns requests still missing chunks into error rows (never dropped).
    """

    out: storage.RunStorage
    attempt: int = 0
    shard_rows: int = SHARD_ROWS
    every_s: float = COMMIT_SECONDS
    clock: Callable[[], float] = time.monotonic
    shards: list[str] = field(default_factory=list)
    rows_committed: int = 0
    _pending: dict[str, dict[int, dict]] = field(default_factory=dict)
    _ready: list[dict] = field(default_factory=list)
    _last: float = 0.0

    def __post_init__(self) -> None:
        self._last = self.clock()

    def add(self, rows: Iterable[dict]) -> None:
        for r in rows:
            parts = self._pending.setdefault(r["request_id"], {})
            parts[int(r.get("chunk_index") or 0)] = r
            if len(parts) >= int(r.get("n_chunks") or 1):
                self._ready += self._pending.pop(r["request_id"]).values()
        if self._ready and (len(self._ready) >= self.shard_rows or self.clock() - self._last >= self.every_s):
            self.commit()

    def add_stream(self, batch: pa.Table) -> None:
        """A batch from the pipeline: the tally rows of rows a worker committed (columns ``shard`` and ``rows``
        set, :func:`commit_batch`) are counted; the others are added (:meth:`add`)."""
        if SHARD_COLUMN not in batch.column_names:
            self.add(batch.to_pylist())
            return
        shard = batch.column(SHARD_COLUMN)
        self.rows_committed += int(pc.sum(batch.column(ROWS_COLUMN)).as_py() or 0)
        self.shards += [k for k in dict.fromkeys(shard.to_pylist()) if k is not None]
        if shard.null_count:
            self.add(batch.filter(pc.is_null(shard)).drop_columns([SHARD_COLUMN, ROWS_COLUMN]).to_pylist())

    def commit(self) -> None:
        """Commit the complete requests waiting, if any."""
        if not self._ready:
            return
        self.shards.append(commit_shard(self.out, self._ready, self.attempt))
        self.rows_committed += len(self._ready)
        self._ready = []
        self._last = self.clock()

    def close(self) -> None:
        """End of the stream: requests with missing chunks become error rows, then the last commit."""
        for parts in self._pending.values():
            first = dict(min(parts.items())[1])
            n = int(first.get("n_chunks") or 1)
            first.update(chunk_index=0, n_chunks=1, text=None, error_stage="pipeline", error_class=TRANSIENT,
                         error=f"incomplete: {len(parts)} of {n} chunks came back from the pipeline")
            self._ready.append(first)
        self._pending = {}
        self.commit()

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:  # keep what is complete; the rest is redone by --resume
            self.commit()


# ----------------------------------------------------------------------------- items stage


def commit_items(out: storage.RunStorage, items: ItemTable, errors: list[dict], items_in: int) -> None:
    """Write the items stage (valid items, item error rows), then its marker."""
    root = out.root
    out.write_parquet(items.table, storage.join(root, "items", "part-00000.parquet"))
    out.write_parquet(conform(errors, ERRORS), storage.join(root, "item_errors", "part-00000.parquet"))
    marker = {"format": FORMAT, "items": len(items), "errors": len(errors), "items_in": items_in}
    out.write_text(_commits(root, ITEMS_MARKER), json.dumps(marker, sort_keys=True))


def read_marker(uri: str, keys: tuple[str, ...]) -> dict | None:
    """The marker at ``uri``, or None when it is absent or not whole (not JSON, or without one of ``keys``)."""
    try:
        text = storage.read_text(uri)
    except FileNotFoundError:
        return None
    try:
        m = json.loads(text)
    except ValueError:
        m = None
    if not isinstance(m, dict) or any(k not in m for k in keys):
        log.warning("commit marker %s is not whole (%d bytes): counted as not committed", uri, len(text))
        return None
    return m


_ITEMS_KEYS = ("items", "errors", "items_in")
_SHARD_KEYS = ("key", "rows", "requests", "files")


def load_items(root: str) -> tuple[ItemTable, list[dict], int] | None:
    """The committed items stage → (items, item error rows, rows read), or None if not committed."""
    m = read_marker(_commits(root, ITEMS_MARKER), _ITEMS_KEYS)
    if m is None:
        return None
    items = ItemTable(storage.read_parquet(storage.join(root, "items", "part-00000.parquet")))
    errors = storage.read_parquet(storage.join(root, "item_errors", "part-00000.parquet")).to_pylist()
    if (len(items), len(errors)) != (m["items"], m["errors"]):
        raise RunStateError(f"{root}: committed items stage is damaged: marker says {m['items']} items and "
                            f"{m['errors']} errors, files hold {len(items)} and {len(errors)}")
    return items, [{k: v for k, v in e.items() if v is not None} for e in errors], int(m["items_in"])


# ----------------------------------------------------------------------------- reading committed shards


@dataclass
class Committed:
    """What earlier attempts of a run committed: rows (one per chunk; a request's latest attempt only),
    their request ids, and the next attempt's number."""

    rows: list[dict]
    shards: list[str]
    next_attempt: int = 1
    superseded: int = 0  # rows of requests that a later attempt committed again

    @cached_property
    def request_ids(self) -> set[str]:
        """The committed requests (computed once: rows do not change)."""
        return {r["request_id"] for r in self.rows}


def shard_markers(root: str, index: bool = True) -> list[dict]:
    """The shard commit markers of the run, by key; without ``index``, the first attempt's markers without
    their indexes (a row per committed row: the driver need not hold a million of them to list the shards).
    Later attempts' markers keep theirs: they say which requests a resume committed again."""
    out = []
    for uri in storage.list_files(_commits(root), ".json"):
        name = uri.rsplit("/", 1)[-1]
        if name.startswith("shard-") and (m := read_marker(uri, _SHARD_KEYS)) is not None:
            if not index and int(m.get("attempt", 0)) == 0:
                m.pop("index", None)
            out.append(m)
    return sorted(out, key=lambda m: m["key"])


def _shard_rows(root: str, m: dict) -> list[dict]:
    """A committed shard's rows (responses joined with judgments), checked against its marker."""
    resp = storage.read_parquet(storage.join(root, m["files"]["responses"])).to_pylist()
    judg = storage.read_parquet(storage.join(root, m["files"]["judgments"])).to_pylist()
    if not len(resp) == len(judg) == m["rows"]:
        raise RunStateError(f"{root}: committed shard {m['key']} is damaged: marker says {m['rows']} rows, "
                            f"files hold {len(resp)} responses and {len(judg)} judgments")
    by_key = {(j["request_id"], j["chunk_index"]): j for j in judg}
    return [{**r, **{k: by_key.get((r["request_id"], r["chunk_index"]), {}).get(k) for k in _JUDGMENT_ONLY}}
            for r in resp]


def _latest(root: str, rows: list[dict]) -> list[dict]:
    """Of rows tagged ``_attempt``, each request's rows of its latest attempt, untagged and sorted by
    (request_id, chunk_index), checked: no chunk twice, none missing."""
    latest: dict[str, int] = {}
    for r in rows:
        latest[r["request_id"]] = max(latest.get(r["request_id"], 0), r["_attempt"])
    rows = [r for r in rows if r.pop("_attempt") == latest[r["request_id"]]]
    rows.sort(key=lambda r: (r["request_id"], r["chunk_index"] or 0))
    chunks: dict[str, list[int]] = {}
    for r in rows:
        chunks.setdefault(r["request_id"], []).append(r["chunk_index"] or 0)
    for rid, got in chunks.items():
        if len(set(got)) != len(got):
            raise RunStateError(f"{root}: request {rid} has a chunk committed twice (chunks {got})")
    n_of = {r["request_id"]: int(r["n_chunks"] or 1) for r in rows}
    broken = sorted(rid for rid, got in chunks.items() if sorted(got) != list(range(n_of[rid])))
    if broken:
        raise RunStateError(f"{root}: {len(broken)} committed request(s) lack some chunks, e.g. {broken[0]}")
    return rows


def _next_attempt(markers: list[dict]) -> int:
    return 1 + max((int(m.get("attempt", 0)) for m in markers), default=0)


def load_committed(root: str) -> Committed:
    """Every committed row (responses joined with judgments), sorted by (request_id, chunk_index).

    Only files named by a marker are read. Raises :class:`RunStateError` if a shard's files do not
    match its marker, a chunk is committed twice, or a committed request lacks some of its chunks.
    """
    markers = shard_markers(root)
    rows = [{**r, "_attempt": int(m.get("attempt", 0))} for m in markers for r in _shard_rows(root, m)]
    n_all = len(rows)
    rows = _latest(root, rows)
    return Committed(rows=rows, shards=[m["key"] for m in markers], next_attempt=_next_attempt(markers),
                     superseded=n_all - len(rows))


@dataclass
class CommitIndex:
    """What the markers say was committed: per request (its latest attempt), the failure classes of its
    error rows (empty when it has none), the shards holding those rows and that attempt's number; the next
    attempt's number."""

    errors: dict[str, set[str]]
    shards_of: dict[str, list[str]]
    markers: dict[str, dict] = field(default_factory=dict)
    next_attempt: int = 0
    attempt_of: dict[str, int] = field(default_factory=dict)  #: request → the attempt its committed rows are of

    @property
    def request_ids(self) -> set[str]:
        return set(self.errors)

    def with_errors(self, classes: set[str]) -> set[str]:
        """The requests with an error row of a class in ``classes``."""
        return {rid for rid, got in self.errors.items() if got & classes} if classes else set()


def _index_rows(root: str, m: dict) -> list[dict]:
    """A marker's index as rows; a marker without one (written before it existed) from its shard's files."""
    idx = m.get("index")
    if idx is None:
        return [_index_row(r) for r in _shard_rows(root, m)]
    n = len(idx["request_id"])
    if n != m["rows"]:
        raise RunStateError(f"{root}: committed shard {m['key']} is damaged: marker says {m['rows']} rows, "
                            f"its index lists {n}")
    return [dict(zip(_INDEX, row)) for row in zip(*(idx[k] for k in _INDEX))]


def load_index(root: str) -> CommitIndex:
    """The run's committed requests from its markers' indexes, checked as :func:`load_committed` checks
    rows (no chunk twice, none missing), without reading the shards' data files."""
    markers = shard_markers(root)
    rows = [{**r, "_attempt": int(m.get("attempt", 0)), "_shard": m["key"]} for m in markers for r in _index_rows(root, m)]
    errors: dict[str, set[str]] = {}
    shards_of: dict[str, list[str]] = {}
    attempt_of: dict[str, int] = {}
    for r in rows:
        attempt_of[r["request_id"]] = max(attempt_of.get(r["request_id"], 0), r["_attempt"])
    for r in _latest(root, rows):
        got = errors.setdefault(r["request_id"], set())
        if r["error_stage"] is not None:
            got.add(class_of(r["error_stage"] or None, r["error_class"]))
        shards = shards_of.setdefault(r["request_id"], [])
        if r["_shard"] not in shards:
            shards.append(r["_shard"])
    return CommitIndex(errors=errors, shards_of=shards_of, markers={m["key"]: m for m in markers},
                       next_attempt=max(_next_attempt(markers), attempts.latest(root)), attempt_of=attempt_of)


def iter_committed(root: str, max_rows: int) -> Iterator[list[dict]]:
    """Every committed row, as :func:`load_committed` gives them (a request's latest attempt only, checked),
    in groups of whole shards of about ``max_rows`` rows: a request's rows are always in one group, and the
    run's rows are never all in memory at once. A request's latest attempt is learned from the markers of the
    attempts after the first (the requests a resume ran again), never from the shards' data files."""
    markers = shard_markers(root, index=False)
    latest: dict[str, int] = {}
    for m in markers:
        a = int(m.get("attempt", 0))
        if a > 0:
            for r in _index_rows(root, m):
                latest[r["request_id"]] = max(latest.get(r["request_id"], 0), a)
    group: list[dict] = []
    for m in markers:
        a = int(m.get("attempt", 0))
        group += [{**r, "_attempt": a} for r in _shard_rows(root, m) if latest.get(r["request_id"], a) <= a]
        if len(group) >= max_rows:
            yield _latest(root, group)
            group = []
    if group:
        yield _latest(root, group)


def committed_count(root: str) -> int:
    """How many requests are committed: from the markers' request counts when only one attempt committed (no
    request can be in two of its shards), else from their indexes."""
    markers = shard_markers(root, index=False)
    if all(int(m.get("attempt", 0)) == 0 for m in markers):
        return sum(int(m["requests"]) for m in markers)
    return len(load_index(root).request_ids)


def model_infos(root: str, names: Iterable[str]) -> dict[str, str]:
    """model name → its recorded ``model_info`` (the first committed), reading only those two columns of the
    response files, and only until every model in ``names`` is found."""
    want, found = set(names), {}
    for m in shard_markers(root, index=False):
        if want <= set(found):
            break
        fs, path = storage.resolve(storage.join(root, m["files"]["responses"]))
        t = pq.read_table(path, filesystem=fs, columns=["model", "model_info"])
        for model, info in zip(t.column("model").to_pylist(), t.column("model_info").to_pylist()):
            if info and model not in found:
                found[model] = info
    return found


def load_requests(root: str, index: CommitIndex, ids: set[str]) -> list[dict]:
    """The committed rows (latest attempt) of the requests ``ids``, reading only the shards that hold them."""
    keys = sorted({k for rid in ids for k in index.shards_of.get(rid, [])})
    rows = [{**r, "_attempt": int(index.markers[k].get("attempt", 0))}
            for k in keys for r in _shard_rows(root, index.markers[k]) if r["request_id"] in ids]
    return _latest(root, rows)


def clean_uncommitted(out: storage.RunStorage) -> list[str]:
    """Delete data files no marker names (left by a killed attempt, e.g. mid-commit); returns them."""
    root = out.root
    keep = set()
    markers = shard_markers(root)
    for m in markers:
        keep |= {storage.join(root, f) for f in m["files"].values()}
    whole = {f"shard-{m['key']}.json" for m in markers}
    items_whole = read_marker(_commits(root, ITEMS_MARKER), _ITEMS_KEYS) is not None
    dirs = ["responses", "judgments"]
    if items_whole:
        keep |= {storage.join(root, "items", "part-00000.parquet"),
                 storage.join(root, "item_errors", "part-00000.parquet")}
    dirs += ["items", "item_errors"]
    keep = {_canon(u) for u in keep}
    gone = []
    for d in dirs:
        for uri in storage.list_files(storage.join(root, d)):
            if _canon(uri) not in keep:
                out.delete(uri)
                gone.append(uri)
    for uri in storage.list_files(_commits(root)):  # half-written markers (local temporary files), markers not whole
        name = uri.rsplit("/", 1)[-1]
        torn = (name.startswith("shard-") and name not in whole) or (name == ITEMS_MARKER and not items_whole)
        if name.startswith(".") or torn:
            out.delete(uri)
            gone.append(uri)
    if gone:
        log.info("resume: removed %d uncommitted file(s) of an earlier attempt", len(gone))
    return gone


def _canon(uri: str) -> str:
    fs, path = storage.resolve(uri)
    return ("s3://" if storage.is_s3(uri) else "") + path
