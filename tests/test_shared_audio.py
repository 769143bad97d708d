"""The decode stage's blocks hold each distinct sound once (evalcore/pipeline/stages.py, issue 52): requests that
hear the same samples share them, the model gets exactly what a request decoded alone would give it, and the block
crosses Ray's object store as it is."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest
import soundfile as sf

from evalcore.core.schema import REQUEST
from evalcore.pipeline.stages import (DECODED, SHARED_AUDIO_FIELD, Decoder, ModelRunner, audio_arrays, decode_batch,
                                      _table)

SR = 16_000


def _clip(path, hz: float, seconds: float = 1.0) -> str:
    t = np.arange(int(seconds * SR)) / SR
    buf = io.BytesIO()
    sf.write(buf, (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32), SR, format="WAV")
    path.write_bytes(buf.getvalue())
    return str(path)


def _request(i: int, uri: str | None, cond: str = "correct", seed: int | None = None) -> dict:
    row = {f.name: None for f in REQUEST}
    row.update(request_id=f"r{i}", dataset="d", item_id=f"i{i}", protocol="freeform", model="m", condition=cond,
               variant="v", option_order=0, prompt="What key is it in?", audio_uri=uri, seed=seed)
    return row


@pytest.fixture()
def requests(tmp_path) -> list[dict]:
    a, b = _clip(tmp_path / "a.wav", 220.0), _clip(tmp_path / "b.wav", 330.0)
    return [_request(0, a), _request(1, a), _request(2, a), _request(3, b), _request(4, b),
            _request(5, a, "random"),  # plays a (its partner's clip): the same sound as a's own requests
            _request(6, a, "noise", 1), _request(7, a, "noise", 2), _request(8, b, "noise", 1),
            _request(9, a, "silence"), _request(10, a, "silence"), _request(11, b, "silence"),
            _request(12, a, "first_50"), _request(13, a, "text_only"),
            _request(14, str(tmp_path / "gone.wav"))]


def _alone(rows: list[dict], window_s: float | None) -> list[dict]:
    """Each request decoded on its own, as before sounds were shared: one row per chunk with its own array."""
    decoder = Decoder(SR, window_s)
    return [piece for r in rows for piece in decoder.one(dict(r), {})]


# a 1 s clip in windows of 0.4 s: 0.4, 0.4 (the last 0.2 s is dropped, audio.chunk); its first half: 0.4
@pytest.mark.parametrize("window_s, sounds, seconds", [(None, 8, 7.5), (0.4, 15, 6.0)])
def test_a_block_holds_each_distinct_sound_once_and_every_row_hears_its_own(requests, window_s, sounds, seconds):
    out = decode_batch(pa.Table.from_pylist(requests, schema=REQUEST), SR, window_s)
    assert out.schema.field("audio").type == SHARED_AUDIO_FIELD.type
    alone = _alone(requests, window_s)
    timing = ["audio", "decode_s"]  # decode_s: seconds, measured
    assert out.drop_columns(timing).equals(_table(alone, DECODED).drop_columns(timing))
    got = audio_arrays(out.column("audio"))
    assert len(got) == len(alone)
    for row, x, want in zip(out.to_pylist(), got, alone):
        if want["audio"] is None:
            assert x is None, row["request_id"]
        else:
            np.testing.assert_array_equal(x, want["audio"])
    # sounds: a, b, noise a/1, noise a/2, noise b/1, silence for a (twice), silence for b, a's first half; by chunk
    clips = out.column("audio").chunk(0).dictionary
    assert len(clips) == sounds and clips.values.nbytes == seconds * SR * 4
    assert sum(r["audio"].nbytes for r in alone if r["audio"] is not None) > 1.5 * clips.values.nbytes


def test_the_model_gets_what_a_request_decoded_alone_gives_in_batches_of_its_size(requests):
    """A shared block and a block of one array per row give the model the same inputs: the same answers, and
    ``generate`` is called on batches of ``batch_size`` rows."""
    shared = decode_batch(pa.Table.from_pylist(requests, schema=REQUEST), SR, None)
    plain = _table(_alone(requests, None), DECODED)
    calls: list[int] = []
    runner = ModelRunner("dsp_listener", {"max_audio_seconds": None}, (SR, None), batch_size=4)
    generate = runner.model.generate
    runner.model.generate = lambda inputs: calls.append(len(inputs)) or generate(inputs)
    a, b = runner(shared), runner(plain)
    assert a.column("text").to_pylist() == b.column("text").to_pylist()
    assert a.column("error").to_pylist() == b.column("error").to_pylist()
    n = sum(1 for r in requests[:-1])  # the missing file is a decode error: never generated
    assert calls == [4, 4, 4, 2] * 2 and sum(calls) == 2 * n


def test_a_shared_block_crosses_the_object_store_as_it_is(local_ray, requests):
    out = decode_batch(pa.Table.from_pylist(requests, schema=REQUEST), SR, None)
    back = local_ray.get(local_ray.put(out))
    assert back.equals(out) and back.schema.field("audio").type == SHARED_AUDIO_FIELD.type
    half = local_ray.get(local_ray.put(out.slice(3, 6)))  # Ray slices blocks: the indices still find their sounds
    for x, want in zip(audio_arrays(half.column("audio")), audio_arrays(out.slice(3, 6).column("audio"))):
        assert (x is None and want is None) or np.array_equal(x, want)
