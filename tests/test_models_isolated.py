"""An isolated research-model adapter runs in its own environment through the model's runtime_env.

The test builds a separate virtual environment (``python -m venv``, no network): it has a package the
driver does not have (``musiclm_pins``, standing for a research repo's pinned dependencies) and
reaches the driver's packages (ray, evalcore, ...) only *after* its own, through a ``.pth`` file. The
model's ``runtime_env: {py_executable: <that venv's python>}`` makes Ray start only that model's
actors there; the responses record the actor's ``sys.prefix`` and the pinned package's version.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from evalcore.models.base import AudioPrompt

PIN_VERSION = "0.0.1+isolated-env"


@pytest.fixture(scope="module")
def isolated_env(tmp_path_factory) -> Path:
    env = tmp_path_factory.mktemp("isolated") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    python = env / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "musiclm_pins").mkdir()
    (site / "musiclm_pins" / "__init__.py").write_text(f'__version__ = "{PIN_VERSION}"\n')
    # the driver's packages come after the env's own (an import line processes their .pth files too)
    (site / "zz_driver_packages.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    return env


def test_the_env_is_not_the_drivers(isolated_env):
    with pytest.raises(ImportError):
        import musiclm_pins  # noqa: F401
    out = subprocess.run([str(isolated_env / "bin" / "python"), "-c",
                          "import sys, musiclm_pins, ray, evalcore; print(sys.prefix, musiclm_pins.__version__)"],
                         check=True, capture_output=True, text=True).stdout.split()
    assert out == [str(isolated_env), PIN_VERSION] and sys.prefix != str(isolated_env)


def test_adapter_protocol_in_process():
    from evalcore.models.isolated import IsolatedModel

    m = IsolatedModel(adapter="evalcore.models.example_adapter:ExampleAdapter", sample_rate=8000)
    out = m.generate([AudioPrompt(np.full(4000, 0.1, np.float32), 8000, "q"), AudioPrompt(None, 8000, "two words")])
    assert out == ["0.5 s of audio at -20 dBFS", "no audio; question had 2 words"]
    assert m.info()["environment"]["sys_prefix"] == sys.prefix
    with pytest.raises(ImportError, match="musiclm_pins"):  # its pins are not installed here
        IsolatedModel(adapter="evalcore.models.example_adapter:ExampleAdapter",
                      adapter_params={"requires": ["musiclm_pins"]})
    with pytest.raises(ValueError, match="params.adapter"):
        IsolatedModel(adapter="evalcore.models.example_adapter.ExampleAdapter")


def test_adapter_runs_in_its_runtime_env(isolated_env, tmp_path, local_ray):
    from evalcore.runconfig.config import parse_config
    from evalcore.pipeline.run import run

    clips = []
    for i, seconds in enumerate((1.0, 2.0)):
        sf.write(str(tmp_path / f"c{i}.wav"), np.full(int(seconds * 16000), 0.1, np.float32), 16000)
        clips.append({"item_id": f"c{i}", "protocol": "freeform", "question": "Describe the music.",
                      "reference": "a hum", "audio_uri": str(tmp_path / f"c{i}.wav")})
    (tmp_path / "items.jsonl").write_text("\n".join(json.dumps(c) for c in clips))
    adapter = {"kind": "isolated", "resources": {"num_cpus": 0.5, "batch_size": 4},
               "params": {"adapter": "evalcore.models.example_adapter:ExampleAdapter", "sample_rate": 16000,
                          "max_audio_seconds": 30, "adapter_params": {"requires": ["musiclm_pins"]}}}
    cfg = parse_config({
        "name": "isolated",
        "datasets": [{"name": "d", "kind": "items_file", "params": {"path": str(tmp_path / "items.jsonl")}}],
        "models": [{**adapter, "name": "pinned",
                    "runtime_env": {"py_executable": str(isolated_env / "bin" / "python")}}],
        "protocols": [{"name": "freeform", "conditions": ["correct", "text_only"]}],
        "storage": {"root": str(tmp_path / "run")}, "stats": {"bootstrap_resamples": 100},
        "ray": {"progress_bars": False, "decode_num_cpus": 0.5},
    })
    run(cfg)
    rows = pq.read_table(f"{cfg.root}/responses").to_pandas()
    rows = rows[rows.model == "pinned"]
    assert len(rows) == 4 and rows.error.isna().all()
    assert sorted(rows.text) == ["1.0 s of audio at -20 dBFS", "2.0 s of audio at -20 dBFS",
                                 "no audio; question had 3 words", "no audio; question had 3 words"]
    for info in map(json.loads, rows.model_info):
        assert info["environment"]["sys_prefix"] == str(isolated_env) != sys.prefix
        assert info["adapter_info"]["requires"] == {"musiclm_pins": PIN_VERSION}
