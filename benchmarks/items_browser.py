"""The item browser at scale: a finished run of 100,000 items under the five audio conditions, its ``items.html``
written by ``evalcore browse``'s code, then opened in headless Chromium.

The run is made here without Ray or models (the pipeline's cost is measured elsewhere): its items, committed
responses and judgments shards (:func:`evalcore.pipeline.commit.commit_shard`), per-item and error tables, config and
run.json, as a run writes them; multiple-choice answers from a "listener" right 80 % of the time with the correct
audio and at chance otherwise, and a "text prior" that always answers A (add ``--models 1`` for the listener only);
0.5 % of the requests are decode errors. Items share clips (``--clips``), as benchmarks' questions share tracks.

Measured, each beside a baseline of ``--baseline-items`` items made and measured the same way in the same process:

* writing the browser: reading the run's requests, rebuilding and encoding the clips, the page and its shards;
* the page in Chromium (1280 px): milliseconds from navigation to its first 25 rows (``EVB.firstShown``, the page's
  ``performance.now()``), then to the evidence of not listening over every item (all index shards), then to page 2;
* bytes: the page itself (items.html, items.js, items.css, meta.js), its data shards, its index shards, its clips.

    .venv/bin/python benchmarks/items_browser.py [--items 100000] [--clips 2000] [--seconds 5] [--models 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import soundfile as sf
import yaml

from evalcore.core import storage
from evalcore.core.item_table import ItemTable
from evalcore.pipeline import commit
from evalcore.pipeline.browse import requests_table, write_browser
from evalcore.core.schema import ERRORS, conform
from evalcore.core.seeding import derive_seed, stable_id

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the DevTools pipe client of the page tests
CONDITIONS = ["correct", "random", "silence", "noise", "text_only"]
OPTIONS = ["guitar", "piano", "drums", "flute"]
SR = 16_000


def make_run(root: Path, n_items: int, n_clips: int, seconds: float, models: list[str]) -> int:
    """A finished run at ``root``; returns its number of requests."""
    if root.exists():
        shutil.rmtree(root)
    (root / "audio").mkdir(parents=True)
    out = storage.RunStorage(str(root))
    t = np.arange(int(seconds * SR)) / SR
    gen = np.random.default_rng(0)
    uris = []
    for c in range(n_clips):
        x = 0.3 * np.sin(2 * np.pi * 110 * 2 ** (c % 36 / 12) * t) + 0.03 * gen.standard_normal(t.size)
        uris.append(str(root / "audio" / f"clip{c:05d}.wav"))
        sf.write(uris[-1], x.astype(np.float32), SR)
    items = [{"dataset": "big", "item_id": f"q{i:06d}", "protocol": "mcq", "task": "instrument",
              "audio_uri": uris[i % n_clips], "question": f"Which instrument leads? (question {i})",
              "options": OPTIONS, "correct_option": i % 4} for i in range(n_items)]
    commit.commit_items(out, ItemTable.from_rows(items), [], n_items)
    kinds = {"listener": "dsp_listener", "text-prior": "text_prior"}
    info = {m: json.dumps({"backend": kinds[m]}) for m in models}
    rows, scored, errors, n = [], [], [], 0
    for i, it in enumerate(items):
        clip = i % n_clips
        for m in models:
            for cond in CONDITIONS:
                rid = stable_id(it["item_id"], m, cond)
                r = {"request_id": rid, "dataset": "big", "item_id": it["item_id"], "protocol": "mcq",
                     "protocol_kind": "mcq", "task": "instrument", "model": m, "condition": cond, "variant": "default",
                     "option_order": 0, "question": it["question"], "options": OPTIONS,
                     "correct_index": it["correct_option"], "clip_id": f"q{clip:06d}", "chunk_index": 0,
                     "n_chunks": 1, "model_info": info[m], "audio_uri": it["audio_uri"], "excerpt_start": None,
                     "excerpt_end": None, "audio_seconds": seconds}
                if cond == "random":
                    r.update(audio_uri=uris[(clip + 1) % n_clips], audio_item_id=f"q{(clip + 1) % n_clips:06d}")
                elif cond == "noise":
                    r["seed"] = derive_seed("noise", 0, "big", f"q{clip:06d}")
                elif cond == "text_only":
                    r.update(audio_uri=None, audio_seconds=0.0)
                if (i * 7 + len(cond)) % 200 == 0 and cond != "text_only":
                    r.update(error="missing: audio file not found (benchmark)", error_stage="decode",
                             error_class="input", audio_seconds=None)
                    errors.append({"table": "requests", **{k: r.get(k) for k in ERRORS.names if k != "table"}})
                else:
                    hears = m == "listener" and cond == "correct"
                    p = it["correct_option"] if hears and gen.random() < 0.8 else (
                        0 if m == "text-prior" else int(gen.integers(4)))
                    r.update(text=f"The answer is ({'ABCD'[p]}).", parsed_index=p, judge="mcq_string@1")
                    scored.append({k: r.get(k) for k in ("request_id", "dataset", "item_id", "protocol", "model",
                                                         "condition", "variant", "option_order", "protocol_kind",
                                                         "task", "audio_item_id", "clip_id", "text", "options",
                                                         "correct_index", "parsed_index", "judge")}
                                  | {"correct": float(p == it["correct_option"]), "answered": 1.0})
                rows.append(r)
                n += 1
        if len(rows) >= 4096:
            commit.commit_shard(out, rows)
            rows = []
    if rows:
        commit.commit_shard(out, rows)
    (root / "tables").mkdir()
    out.write_parquet(pa.Table.from_pandas(pd.DataFrame(scored), preserve_index=False),
                      str(root / "tables" / "per_item.parquet"))
    out.write_parquet(conform(errors, ERRORS), str(root / "tables" / "errors.parquet"))
    cfg = {"name": "big", "datasets": [{"name": "big", "kind": "synthetic", "params": {"n_clips": n_clips}}],
           "models": [{"name": m, "kind": kinds[m]} for m in models],
           "protocols": [{"name": "mcq", "conditions": CONDITIONS}], "storage": {"root": str(root)}}
    (root / "config.yaml").write_text(yaml.safe_dump(cfg))
    (root / "run.json").write_text(json.dumps({"name": "big", "root": str(root), "created": "benchmark",
                                               "counts": {"items_in": n_items, "requests_in": n,
                                                          "requests_errored": len(errors)}}))
    return n


def sizes(root: Path) -> dict[str, int]:
    b = root / "browser"
    page = (root / "items.html").stat().st_size + sum((b / f).stat().st_size for f in ("items.js", "items.css",
                                                                                       "meta.js"))
    return {"page": page, **{f"{k}_bytes": sum(f.stat().st_size for f in (b / k).iterdir()) for k in ("data", "index", "clips")},
            "clips_n": len(list((b / "clips").iterdir()))}


def in_chromium(root: Path, profile: Path) -> dict[str, float]:
    from cdp import Chromium

    with Chromium(profile, 1280, 900) as browser:
        page = browser.page("about:blank")
        t0 = time.perf_counter()
        page.goto((root / "items.html").as_uri())
        page.wait("window.EVB && EVB.firstShown !== undefined", timeout=120, every=0.01)
        wall = time.perf_counter() - t0
        first = page.eval("EVB.firstShown")
        rows = page.eval("document.querySelectorAll('article.item').length")
        out = {"first_page_ms": first, "first_page_wall_s": wall, "rows": rows}
        for name, state in (("evidence_ms", "ev=1&sort=evidence"), ("page2_ms", "ev=1&sort=evidence&page=2")):
            t = page.eval(f"(() => {{ window.__t = performance.now(); location.hash = {json.dumps(state)}; }})()")
            page.wait(f"document.body.dataset.state === {json.dumps(state)}", timeout=300, every=0.01)
            out[name] = page.eval("performance.now() - window.__t")
        out["evidence_items"] = int(page.eval("document.body.dataset.total"))
        out["overflow"] = int(page.eval("document.documentElement.scrollWidth - document.documentElement.clientWidth"))
    return out


def measure(root: Path, n_items: int, n_clips: int, seconds: float, models: list[str], tmp: Path) -> dict:
    t = time.perf_counter()
    n_req = make_run(root, n_items, n_clips, seconds, models)
    made = time.perf_counter() - t
    t, c = time.perf_counter(), time.process_time()  # CPU seconds of every thread of this process
    write_browser(str(root))
    written, written_cpu = time.perf_counter() - t, time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    requests_table(str(root))
    reading, reading_cpu = time.perf_counter() - t, time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    write_browser(str(root))  # again: every clip is on disk already (decoded and hashed, not encoded)
    again, again_cpu = time.perf_counter() - t, time.process_time() - c
    return {"items": n_items, "requests": n_req, "clips": n_clips, "made_s": made, "write_s": written,
            "write_cpu": written_cpu, "read_requests_s": reading, "read_cpu": reading_cpu, "rewrite_s": again,
            "rewrite_cpu": again_cpu, **sizes(root), **in_chromium(root, tmp / root.name)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--clips", type=int, default=2_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--models", type=int, choices=(1, 2), default=2)
    ap.add_argument("--baseline-items", type=int, default=1_000)
    ap.add_argument("--keep", action="store_true", help="keep the runs under benchmarks/_work/items_browser")
    a = ap.parse_args()
    models = ["listener", "text-prior"][:a.models]
    work = HERE / "_work" / "items_browser"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = measure(work / "baseline", a.baseline_items, max(2, a.clips * a.baseline_items // a.items), a.seconds, models, Path(tmp))
        big = measure(work / "big", a.items, a.clips, a.seconds, models, Path(tmp))
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end (CPU seconds do not "
          "depend on the load; wall seconds do)")
    for r in (base, big):
        print(f"\n{r['items']:,} items, {r['requests']:,} requests ({len(models)} model(s) x 5 conditions), "
              f"{r['clips']:,} clips of {a.seconds:g} s")
        print(f"  run made (not measured) in {r['made_s']:.1f} s")
        print(f"  browser written in {r['write_s']:.1f} s, {r['write_cpu']:.1f} s of CPU (reading the requests "
              f"{r['read_requests_s']:.1f} s, {r['read_cpu']:.1f} s of CPU; written again with every clip on disk: "
              f"{r['rewrite_s']:.1f} s, {r['rewrite_cpu']:.1f} s of CPU)")
        print(f"  page itself {r['page']:,} B · data shards {r['data_bytes']:,} B · index shards "
              f"{r['index_bytes']:,} B · {r['clips_n']:,} clip files {r['clips_bytes']:,} B")
        print(f"  Chromium: first {r['rows']} rows shown {r['first_page_ms']:.0f} ms after navigation "
              f"(wall {r['first_page_wall_s']:.2f} s); evidence of not listening over all items "
              f"({r['evidence_items']:,}) {r['evidence_ms']:.0f} ms; its page 2 {r['page2_ms']:.0f} ms; "
              f"overflow {r['overflow']} px")
    print(f"\nratios {big['items']:,} / {base['items']:,} items: write {big['write_cpu'] / base['write_cpu']:.1f}x (CPU), "
          f"first page {big['first_page_ms'] / base['first_page_ms']:.2f}x, page bytes {big['page'] / base['page']:.2f}x, "
          f"evidence view {big['evidence_ms'] / base['evidence_ms']:.1f}x")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
