"""Inputs at the edges, one stage at a time (no Ray): item numbers that overflow, paths that are not files,
reads that never finish, audio that decodes to nothing or to numbers too large, relative paths.

``tests/test_bad_inputs.py`` runs the same cases through a whole run; these tests pin each stage's part.
"""

from __future__ import annotations

import io
import json
import os
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import soundfile as sf

from evalcore.core import audio, storage
from evalcore.datasets.base import DatasetContext
from evalcore.datasets.items_file import ItemsFile
from evalcore.datasets.validate import validate_items
from evalcore.pipeline.stages import decode_batch
from evalcore.protocols import checks
from evalcore.core.schema import REQUEST

ITEM = {"item_id": "a", "protocol": "factual", "question": "Which instruments?", "labels": ["guitar"],
        "audio_uri": "/audio/a.wav"}


def _wav(x: np.ndarray, sr: int, subtype: str | None = None) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, x, sr, format="WAV", subtype=subtype)
    return buf.getvalue()


def _tone(seconds: float, sr: int) -> np.ndarray:
    return (0.3 * np.sin(2 * np.pi * 220 * np.arange(int(seconds * sr)) / sr)).astype(np.float32)


# ----------------------------------------------------------------------------- item rows


@pytest.mark.parametrize("field, value, reason", [
    ("excerpt_start", 10**400, "field 'excerpt_start' is out of range: an integer of 401 digits"),
    ("excerpt_end", 1e308, "field 'excerpt_end' is out of range"),
    ("excerpt_end", float("inf"), "field 'excerpt_end' must be a finite number"),
    ("correct_option", 10**400, "field 'correct_option' must be an index into options (0..25), got an integer"),
    ("metadata", "[1,2]", "field 'metadata' must be a JSON object, got list"),
    ("metadata", "NaN", "field 'metadata' must be a JSON object, got float"),
    ("metadata", "{not json", "field 'metadata' is not valid JSON"),
    ("metadata", "[" * 40_000 + "]" * 40_000, "field 'metadata' is too long"),
    ("metadata", "[" * 30_000 + "]" * 30_000, "field 'metadata' is nested too deeply"),
    ("metadata", 7, "field 'metadata' must be a JSON object (text or mapping), got int"),
    ("dataset", "other", "unknown field(s) ['dataset']"),
    ("labels", [], "field 'labels' is empty"),
])
def test_item_fields_at_the_edges_are_error_rows_naming_the_field(field, value, reason):
    good, bad = validate_items("d", [{**ITEM, field: value}])
    assert not good and len(bad) == 1 and bad[0]["error"].startswith(reason), bad[0]["error"]


def test_metadata_given_as_a_mapping_is_stored_as_json_text():
    good, bad = validate_items("d", [{**ITEM, "metadata": {"genre": "rock", "tags": ["a"]}}])
    assert not bad and json.loads(good[0]["metadata"]) == {"genre": "rock", "tags": ["a"]}


def test_look_alike_ids_and_labels_outside_the_vocabulary_warn_and_all_outside_is_an_error():
    ids = ["Q1", "q1 ", "Ｑ1", "Q\u200b1", "Q\u0031", "other"]  # the fifth is "Q1" again: a duplicate
    rows = [{**ITEM, "item_id": i} for i in ids]
    rows += [{**ITEM, "item_id": "some-out", "labels": ["guitar", "Kazoo"]},
             {**ITEM, "item_id": "all-out", "labels": ["Guitar", "kazoo"]}]
    good, bad = validate_items("d", rows)
    assert [b["error"] for b in bad] == ["duplicate item_id 'Q1'"]
    judges = {"factual": ("lexicon", json.dumps({"vocabulary": "instrument"}))}
    kept, errors, outside = checks.check_labels(good, judges)
    assert [e["item_id"] for e in errors] == ["all-out"] and errors[0]["error_stage"] == "load"
    assert errors[0]["error"] == "labels outside the judge's vocabulary: 'Guitar', 'kazoo'"
    assert outside == {"Kazoo": 1} and len(kept) == len(good) - 1
    warnings = checks.warnings(kept, judges)
    assert warnings[0].startswith("dataset 'd': item ids that differ only in case") and "'Q\\u200b1'" in warnings[0]
    assert "'q1 '" in warnings[0] and "'other'" not in warnings[0]
    assert warnings[1] == "1 factual label(s) outside the judge's vocabulary (never matched): 'Kazoo' ×1"


# ----------------------------------------------------------------------------- what is read


def test_fifo_directory_and_device_are_unreadable_before_any_open(tmp_path):
    fifo = tmp_path / "a.wav"
    os.mkfifo(fifo)
    (tmp_path / "dir.wav").mkdir()
    results: dict[str, audio.AudioError] = {}

    def load_all() -> None:
        for p in (str(fifo), str(tmp_path / "dir.wav"), "/dev/null"):
            try:
                audio.load(p, 16000)
            except audio.AudioError as e:
                results[p] = e

    t = threading.Thread(target=load_all, daemon=True)
    t.start()
    t.join(30)
    try:
        assert not t.is_alive(), "reading a FIFO blocked"
    finally:
        if t.is_alive():  # release the blocked open so the thread ends
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert [(e.reason, e.error_class) for e in results.values()] == [("unreadable", "input")] * 3
    assert "is a FIFO" in str(results[str(fifo)]) and "is a device" in str(results["/dev/null"])
    assert "is a directory" in str(results[str(tmp_path / "dir.wav")])


class HungS3:
    """A loopback server that accepts connections and answers HEAD as an S3 server would, then sends the body
    of every GET one byte every 0.2 s: slower than any deadline, too fast for the client's no-progress timeout."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                while not self.stop.is_set():
                    request = conn.recv(65536)
                    if not request:
                        return
                    head = (b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nContent-Type: audio/wav\r\n"
                            b"Last-Modified: Mon, 23 Nov 2026 10:00:00 GMT\r\nETag: \"x\"\r\n\r\n")
                    conn.sendall(head)
                    if request.startswith(b"GET"):
                        while not self.stop.is_set():
                            conn.sendall(b"R")
                            time.sleep(0.2)
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def test_a_read_that_never_finishes_is_a_transient_decode_error(monkeypatch):
    server = HungS3()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    hung = storage.StorageSettings(storage.S3Options(f"http://127.0.0.1:{server.port}", "us-east-1"), 2.0)
    try:
        with storage.using(hung):
            row = _request("s3://bucket/slow.wav")
            out = decode_batch(pa.Table.from_pylist([row], schema=REQUEST), sample_rate=16000,
                               window_s=None).to_pylist()
    finally:
        server.close()
    assert out[0]["error"].startswith("timeout: reading s3://bucket/slow.wav did not finish within 2 s")
    assert (out[0]["error_stage"], out[0]["error_class"]) == ("decode", "transient")


# ----------------------------------------------------------------------------- decode


def test_decode_edges_are_tagged(tmp_path):
    rng = np.random.default_rng(0)
    mp3 = io.BytesIO()
    sf.write(mp3, _tone(2.0, 44100), 44100, format="MP3", subtype="MPEG_LAYER_III")
    huge = np.zeros(1600)
    huge[5] = 1e300
    files = {
        "2mhz.wav": (_wav(np.full(10, 0.1, np.float32), 2_000_000), "bad_rate"),
        "3frames.wav": (_wav(np.full(3, 0.1, np.float32), 48000), "empty"),
        "huge.wav": (_wav(huge, 16000, "DOUBLE"), "out_of_range"),
        "nan.wav": (_wav(np.array([0.0, np.nan]), 16000, "DOUBLE"), "non_finite"),
        "garbage.mp3": (mp3.getvalue()[:200] + rng.integers(0, 256, 20000, dtype=np.uint8).tobytes(), "corrupt"),
    }
    got = {}
    for name, (data, _) in files.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(audio.AudioError) as e:
            audio.load(str(tmp_path / name), 1000)
        got[name] = e.value
    assert {n: e.reason for n, e in got.items()} == {n: want for n, (_, want) in files.items()}
    assert "pipe" not in str(got["garbage.mp3"]) and "no decodable audio stream" in str(got["garbage.mp3"])
    assert "1e+300" in str(got["huge.wav"])
    (tmp_path / "ok.wav").write_bytes(_wav(_tone(1.0, 16000), 16000))
    for start, end in ((None, 1e308), (1e7, None)):
        with pytest.raises(audio.AudioError) as e:
            audio.load(str(tmp_path / "ok.wav"), 1000, start, end)
        assert e.value.reason == "bad_excerpt" and "out of range" in str(e.value)


# ----------------------------------------------------------------------------- paths


def _request(uri: str) -> dict:
    row = {f.name: None for f in REQUEST}
    row.update(request_id="r", dataset="d", item_id="a", protocol="factual", model="m", condition="correct",
               variant="v", option_order=0, audio_uri=uri)
    return row


def test_relative_audio_paths_resolve_on_the_driver_and_decode_from_another_directory(tmp_path, monkeypatch):
    (tmp_path / "audio").mkdir()
    (tmp_path / "audio" / "ok.wav").write_bytes(_wav(_tone(1.0, 16000), 16000))
    (tmp_path / "items").mkdir()
    items = tmp_path / "items" / "items.jsonl"
    items.write_text(json.dumps({**ITEM, "audio_uri": "../audio/ok.wav"}) + "\n"
                     + json.dumps({**ITEM, "item_id": "b", "audio_uri": "ok.wav"}) + "\n")
    monkeypatch.chdir(tmp_path / "items")  # the driver runs next to the items file, given a relative path
    ctx = DatasetContext(name="d", run_root=str(tmp_path / "run"), seed=0)
    by_dir = list(ItemsFile("items.jsonl").items(ctx))
    by_root = list(ItemsFile("items.jsonl", audio_root="../audio").items(ctx))
    assert by_dir[0]["audio_uri"] == by_root[1]["audio_uri"] == str(tmp_path / "audio" / "ok.wav")
    assert by_dir[1]["audio_uri"] == str(tmp_path / "items" / "ok.wav")  # no audio_root: next to the items
    monkeypatch.chdir(tmp_path / "run" if (tmp_path / "run").is_dir() else "/")  # a worker elsewhere
    batch = pa.Table.from_pylist([_request(by_dir[0]["audio_uri"])], schema=REQUEST)
    out = decode_batch(batch, sample_rate=16000, window_s=None).to_pylist()
    assert out[0]["error"] is None and out[0]["audio_seconds"] == pytest.approx(1.0)


def test_absolute_uris():
    assert storage.absolute("a/../b.wav", "s3://bkt/items") == "s3://bkt/items/b.wav"
    assert storage.absolute("../audio/x.wav", "s3://bkt/items") == "s3://bkt/audio/x.wav"
    assert storage.absolute("s3://bkt/x.wav", "/base") == "s3://bkt/x.wav"
    assert storage.absolute("file:///data/x.wav") == "/data/x.wav"
    assert storage.absolute("x.wav", "/base/dir") == "/base/dir/x.wav"
    assert storage.absolute("~/x.wav") == str(Path.home() / "x.wav")
    with pytest.raises(ValueError):
        storage.absolute("../../x.wav", "s3://bkt/items")
