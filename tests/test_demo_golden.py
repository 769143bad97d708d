"""The embedded demo gives the same tables and values as the recorded run in tests/fixtures/golden_demo/.

The fixture holds, compactly: the summary table (every column), the per-item table (keys and every
numeric column; the other columns as a short hash per row), the error rows and run.json's counts.
Floats are compared to 1e-9. After an intended change of the demo's results, record it again with
``PYTHONPATH=. python tests/test_demo_golden.py RUN_ROOT`` from a finished demo run's root.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
import pathlib
import sys

import pytest

GOLDEN = pathlib.Path(__file__).resolve().parent / "fixtures" / "golden_demo"
TABLES = ("summary", "per_item", "errors")
PER_ITEM_KEY = ["request_id"]
TOL = 1e-9


def _cell(v, root: str = "") -> str:
    """One value as text: floats to 12 digits, lists as JSON, the run's root as ``<root>``."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return repr(round(v, 12))
    if hasattr(v, "tolist"):
        v = v.tolist()
    text = json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else str(v)
    return text.replace(root, "<root>") if root else text


def _is_numeric(field) -> bool:
    import pyarrow as pa

    return pa.types.is_floating(field.type) or pa.types.is_integer(field.type)


def snapshot(root: str, shown_as: str | None = None) -> dict[str, list[dict[str, str]]]:
    """The run's tables as sorted lists of string cells (the per-item table with its texts hashed); the path
    ``shown_as`` (default: ``root``) is written ``<root>``."""
    import pyarrow.parquet as pq

    root = str(pathlib.Path(root))
    shown = str(pathlib.Path(shown_as)) if shown_as else root
    out: dict[str, list[dict[str, str]]] = {}
    for name in TABLES:
        table = pq.read_table(f"{root}/tables/{name}.parquet")
        rows = table.to_pylist()
        if name == "per_item":
            numeric = [f.name for f in table.schema if _is_numeric(f)]
            other = [f.name for f in table.schema if not _is_numeric(f) and f.name not in PER_ITEM_KEY]
            rows = [{**{k: _cell(r[k], shown) for k in PER_ITEM_KEY + numeric},
                     "others_sha": hashlib.sha256(json.dumps([_cell(r[k], shown) for k in other]).encode()).hexdigest()[:16]}
                    for r in rows]
        else:
            rows = [{k: _cell(v, shown) for k, v in r.items()} for r in rows]
        out[name] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True) if name != "per_item" else r["request_id"])
    out["counts"] = json.loads(pathlib.Path(root, "run.json").read_text())["counts"]
    return out


def write(root: str, dest: pathlib.Path = GOLDEN, tables: tuple[str, ...] = TABLES) -> None:
    """Record the run at ``root`` in ``dest``: ``tables`` and run.json's counts."""
    dest.mkdir(parents=True, exist_ok=True)
    snap = snapshot(root)
    for name in tables:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(snap[name][0]), lineterminator="\n")
        w.writeheader()
        w.writerows(snap[name])
        with gzip.GzipFile(dest / f"{name}.csv.gz", "wb", mtime=0) as f:
            f.write(buf.getvalue().encode())
    (dest / "counts.json").write_text(json.dumps(snap["counts"], indent=1, sort_keys=True) + "\n")


def load(src: pathlib.Path = GOLDEN, tables: tuple[str, ...] = TABLES) -> dict:
    """A recording (:func:`write`): its tables as lists of string cells, and its counts."""
    out: dict = {}
    for name in tables:
        with gzip.open(src / f"{name}.csv.gz", "rt") as f:
            out[name] = list(csv.DictReader(f))
    out["counts"] = json.loads((src / "counts.json").read_text())
    return out


def _same(a: str, b: str, tol: float = TOL) -> bool:
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=tol, abs_tol=tol)


def differences(got: list[dict], want: list[dict], limit: int = 5, tol: float = TOL) -> list[str]:
    if len(got) != len(want):
        return [f"{len(got)} rows, recorded {len(want)}"]
    if got and set(got[0]) != set(want[0]):
        return [f"columns {sorted(got[0])}, recorded {sorted(want[0])}"]
    diffs = []
    for i, (g, w) in enumerate(zip(got, want)):
        bad = {k: (g[k], w[k]) for k in w if not _same(g[k], w[k], tol)}
        if bad:
            diffs.append(f"row {i} ({w.get('request_id') or w.get('metric')}): {bad}")
        if len(diffs) >= limit:
            break
    return diffs


@pytest.mark.ray
@pytest.mark.slow
def test_demo_gives_the_recorded_tables(tmp_path, demo_run):
    """The session's demo run (conftest ``demo_run``: the shipped config) gives the recorded tables; then the same
    committed rows, reduced a few shards at a time in a copy of its root, give them again."""
    import shutil

    from evalcore.pipeline import commit, reduce
    from evalcore.pipeline.finish import finish
    from evalcore.pipeline.outcome import protocols_without_items

    cfg = demo_run.cfg
    got, want = snapshot(cfg.root), load()
    assert got["counts"] == want["counts"]
    for name in TABLES:
        assert differences(got[name], want[name]) == [], name

    # the same committed rows reduced a few shards at a time (as a run too large for one group is): same tables.
    # In a copy of the root (the session's run stays as it was); its rows still name the clips under the original
    copy = cfg.with_root(str(tmp_path / "refinished"))
    shutil.copytree(cfg.root, copy.root)
    items, item_errors, items_in = commit.load_items(copy.root)
    assert len(commit.shard_markers(copy.root)) > 3
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reduce, "GROUP_ROWS", 500)
        groups = []
        real = commit.iter_committed
        mp.setattr(commit, "iter_committed", lambda root, n: (groups.append(len(g)) or g for g in real(root, n)))
        finish(copy, items_in=items_in, item_errors=item_errors, empty=protocols_without_items(copy, items))
    assert len(groups) > 3 and sum(groups) == sum(1 for _ in commit.load_committed(copy.root).rows)
    got = snapshot(copy.root, shown_as=cfg.root)
    assert got["counts"] == want["counts"]
    for name in TABLES:
        assert differences(got[name], want[name]) == [], f"{name}, reduced by groups"


def test_snapshot_notices_a_changed_value():
    """The comparison can fail: a value moved by more than the tolerance is reported."""
    want = load()["summary"]
    got = [dict(r) for r in want]
    i = next(i for i, r in enumerate(got) if r["value"])
    got[i]["value"] = repr(float(got[i]["value"]) + 1e-6)
    assert len(differences(got, want)) == 1
    got[i]["value"] = repr(float(want[i]["value"]) + 1e-12)
    assert differences(got, want) == []


if __name__ == "__main__":  # RUN_ROOT [DEST TABLE…]: the demo's tables by default
    write(sys.argv[1], *([pathlib.Path(sys.argv[2]), tuple(sys.argv[3:]) or TABLES] if len(sys.argv) > 2 else []))
