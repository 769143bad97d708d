"""A run big enough for the scoring actor pool (``SCORE_POOL_FROM`` requests or more: free-form lexical metrics
scored by ``score`` actors, not tasks) prints no ERROR-level line: in particular not Ray's ``core_worker.cc``
"has constructor arguments in the object store and max_restarts > 0", which every Ray Data actor pool left at
Ray Data's default restarts logs (ray-project/ray#53727; the model pools avoid it the same way).

The run is the CLI's, in a process of its own with its console piped: 10,000 free-form questions of an items file
over 8 short clips, answered by the weight-free ``text_prior`` (it reads no audio) under ``correct``, scored by
BLEU and ROUGE.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
import yaml

from evalcore.pipeline.stream_metrics import SCORE_POOL_FROM

pytestmark = [pytest.mark.ray, pytest.mark.slow]

# Python logging ("ERROR") and Ray's C++ logging ("[2026-11-23 18:51:00,146 E 5982 5982] core_worker.cc …")
ERROR_LINE = re.compile(r"\bERROR\b|^\[[^\]]* E \d+ \d+\]|\"levelname\":\s*\"E\"", re.M)
CLIPS = 8


def _items(tmp, n: int) -> str:
    (tmp / "audio").mkdir()
    for c in range(CLIPS):
        sf.write(tmp / "audio" / f"c{c}.wav", (0.1 * np.sin(np.arange(8000) * (c + 1) / 50)).astype("float32"), 16_000)
    path = tmp / "items.jsonl"
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"item_id": f"q{i:05d}", "protocol": "freeform", "task": "caption",
                                "audio_uri": f"audio/c{i % CLIPS}.wav", "question": f"Describe piece {i}.",
                                "reference": f"A calm piano piece with soft strings, number {i % 97}."}) + "\n")
    return str(path)


def test_a_run_on_the_scoring_pool_prints_no_error_line(tmp_path) -> None:
    n = SCORE_POOL_FROM
    cfg = {"name": "pool", "datasets": [{"name": "qa", "kind": "items_file", "params": {"path": _items(tmp_path, n)}}],
           "models": [{"name": "prior", "kind": "text_prior",
                       "resources": {"num_cpus": 0.25, "concurrency": 1, "batch_size": 256}}],
           "protocols": [{"name": "freeform", "conditions": ["correct"],
                          "metrics": {"profile": "mullama", "names": ["bleu", "rouge"]}}],
           "stats": {"bootstrap_resamples": 100}, "ray": {"decode_num_cpus": 0.25, "progress_bars": False}}
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # a local cluster of its own
    proc = subprocess.run([sys.executable, "-m", "evalcore.cli", "run", str(path), "--out", "out", "--quiet"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    counts = json.loads((tmp_path / "out" / "run.json").read_text())["counts"]  # a quiet healthy run prints none
    assert counts["requests_in"] >= SCORE_POOL_FROM and counts["requests_scored"] == n, counts
    both = proc.stdout + proc.stderr
    assert "has constructor arguments in the object store" not in both, both[-4000:]
    assert not ERROR_LINE.search(both), ERROR_LINE.search(both).group(0)
    scores = (tmp_path / "out" / "tables").iterdir()
    assert any(p.name.startswith("summary") for p in scores)
