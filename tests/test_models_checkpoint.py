"""Checkpoint resolution and identity: local directories, and s3:// prefixes on a real SeaweedFS server
(copied once, atomically, re-copied when the prefix changes), loaded by the transformers backend."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import s3_server
from evalcore.core import storage
from evalcore.models import checkpoint as ck
from evalcore.models.base import AudioPrompt
from s3_server import DATA_BUCKET


def _files(d, files: dict[str, bytes]) -> str:
    for rel, data in files.items():
        os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
        with open(os.path.join(d, rel), "wb") as f:
            f.write(data)
    return str(d)


def test_content_hash_covers_names_and_bytes_not_location(tmp_path):
    base = {"config.json": b"{}", "weights/model.bin": b"\x00\x01" * 1000}
    a = ck.content_sha256(_files(tmp_path / "a", base))
    assert ck.content_sha256(_files(tmp_path / "b", base)) == a  # same checkpoint elsewhere: same hash
    assert ck.content_sha256(_files(tmp_path / "c", {**base, "config.json": b"{ }"})) != a  # one byte
    assert ck.content_sha256(_files(tmp_path / "d", {"config.json": b"{}", "weights/model2.bin": base[
        "weights/model.bin"]})) != a  # a renamed file
    assert ck.content_sha256(_files(tmp_path / "e", {**base, "extra.txt": b""})) != a  # an added empty file


def test_local_checkpoint_identity_and_revision(tmp_path):
    d = _files(tmp_path / "ck", {"config.json": b"{}"})
    c = ck.resolve_checkpoint(d)
    assert c.local_dir == d and c.identity() == {"uri": d, "sha256": ck.content_sha256(d), "revision": None}
    r = ck.resolve_checkpoint(d, revision="step-1234")
    assert r.identity() == {"uri": d, "sha256": None, "revision": "step-1234"}
    with pytest.raises(ck.CheckpointError, match="not a directory"):
        ck.resolve_checkpoint(str(tmp_path / "missing"))


# ----------------------------------------------------------------------------- s3


@pytest.fixture(scope="module")
def s3(seaweedfs):
    with s3_server.as_run_identity(seaweedfs) as server:
        yield server


def _upload(server, local_dir: str, prefix: str) -> None:
    fs = server.filesystem(server.admin)
    for rel in ck._local_files(local_dir):
        with open(os.path.join(local_dir, rel), "rb") as src, fs.open_output_stream(f"{prefix}/{rel}") as out:
            out.write(src.read())


def test_s3_checkpoint_is_copied_once_atomically_and_recopied_when_changed(s3, tmp_path, monkeypatch):
    src = _files(tmp_path / "src", {"config.json": b'{"a": 1}', "sub/w.bin": os.urandom(3000)})
    _upload(s3, src, f"{DATA_BUCKET}/ckpts/one")
    uri, cache = f"s3://{DATA_BUCKET}/ckpts/one", str(tmp_path / "cache")
    c = ck.resolve_checkpoint(uri, cache_dir=cache)
    assert c.sha256 == ck.content_sha256(src) and c.uri == uri  # the copy hashes like the original
    assert ck.content_sha256(c.local_dir) == c.sha256 and os.path.dirname(c.local_dir) == cache
    assert ck.resolve_checkpoint(uri, cache_dir=cache) is c  # once per process
    copies = [n for n in os.listdir(cache) if not n.endswith(".json")]
    assert copies == [os.path.basename(c.local_dir)]  # no temporary directory left behind

    # another process on the same node (fresh memo): reuses the finished copy, copies nothing
    monkeypatch.setattr(ck, "_resolved", {})
    monkeypatch.setattr(ck, "_copy_prefix", lambda *a: pytest.fail("copied again"))
    assert ck.resolve_checkpoint(uri, cache_dir=cache).local_dir == c.local_dir
    monkeypatch.undo()

    # the checkpoint is rewritten under the same prefix: a new copy with a new identity (the change is seen
    # in the listing: names, sizes, modification times — S3 has no cheaper content signal pyarrow exposes)
    with s3.filesystem(s3.admin).open_output_stream(f"{DATA_BUCKET}/ckpts/one/config.json") as f:
        f.write(b'{"a": 22}')
    monkeypatch.setattr(ck, "_resolved", {})
    c2 = ck.resolve_checkpoint(uri, cache_dir=cache)
    assert c2.local_dir != c.local_dir and c2.sha256 != c.sha256
    assert open(os.path.join(c2.local_dir, "config.json"), "rb").read() == b'{"a": 22}'

    with pytest.raises(ck.CheckpointError, match="no files"):
        ck.resolve_checkpoint(f"s3://{DATA_BUCKET}/ckpts/none", cache_dir=cache)


def test_hf_backend_loads_from_s3(s3, tmp_path):
    pytest.importorskip("transformers")
    from evalcore.models.audio_chat import answer_view
    from evalcore.models.hf_audio import HFAudioLM
    from evalcore.models.tiny import build_tiny

    local = build_tiny("qwen2_audio", str(tmp_path / "q"))
    _upload(s3, local, f"{DATA_BUCKET}/ckpts/qwen")
    uri = f"s3://{DATA_BUCKET}/ckpts/qwen"
    assert HFAudioLM.audio_spec({"checkpoint": uri}) == (16_000, 30.0)  # one small read, no copy
    remote = HFAudioLM(checkpoint=uri, max_new_tokens=5, cache_dir=str(tmp_path / "cache"))
    here = HFAudioLM(checkpoint=local, max_new_tokens=5)
    assert remote.info()["checkpoint"] == {"uri": uri, "sha256": here.info()["checkpoint"]["sha256"], "revision": None}
    batch = [AudioPrompt(np.sin(np.arange(16_000) / 5.0).astype(np.float32), 16_000, "Describe the music.")]
    assert [answer_view(a) for a in remote.generate(batch)] == [answer_view(a) for a in here.generate(batch)]
    shutil.rmtree(tmp_path / "cache")
