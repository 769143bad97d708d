"""``evalcore make-checkpoint FAMILY DIR`` writes a tiny random-weight checkpoint that ``hf_audio_lm`` loads and
answers with, and that ``evalcore validate`` accepts as a config's checkpoint; mistakes exit 2 with one line. Its
answers run to the token limit, except with ``--ends-answers``: then every answer of a dry run ends, for every
family it builds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.core.errors import ExitCode
from evalcore.models.base import AudioPrompt
from evalcore.models.tiny import FAMILIES

pytest.importorskip("torch")
pytest.importorskip("transformers")

runner = CliRunner()


def test_a_made_qwen2_audio_checkpoint_loads_answers_and_validates(tmp_path) -> None:
    from evalcore.models.audio_chat import answer_view
    from evalcore.models.hf_audio import HFAudioLM

    ckpt = tmp_path / "tiny-qwen"
    res = runner.invoke(app, ["make-checkpoint", "qwen2_audio", str(ckpt), "--seed", "3"])
    assert res.exit_code == ExitCode.OK, res.output
    assert str(ckpt) in res.stdout and "hf_audio_lm or vllm_audio_lm" in res.stdout
    model = HFAudioLM(checkpoint=str(ckpt), max_new_tokens=4)
    assert (model.sample_rate, model.max_audio_seconds) == (16_000, 30.0)
    audio = (0.3 * np.random.default_rng(0).standard_normal(16_000)).astype(np.float32)
    (answer,) = model.generate([AudioPrompt(audio, 16_000, "Describe the music.")])
    assert str(answer).startswith("incomplete: the answer was cut at the token limit (4 new tokens")  # random weights
    assert answer_view(answer).startswith("incomplete: ")
    assert model.info()["checkpoint"]["uri"] == str(ckpt)
    # the negative control of --ends-answers (below): a dry run's answers mostly run to the limit
    dry = HFAudioLM(checkpoint=str(ckpt), max_new_tokens=DRY_RUN_LIMIT).generate(dry_run())
    assert sum(not isinstance(a, str) for a in dry) > len(dry) / 2, [answer_view(a) for a in dry]

    cfg = {"name": "dry", "datasets": [{"name": "s", "kind": "synthetic", "params": {"n_clips": 2}}],
           "models": [{"name": "tiny", "kind": "hf_audio_lm", "params": {"checkpoint": str(ckpt)}}],
           "protocols": [{"name": "factual"}]}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    ok = runner.invoke(app, ["validate", str(tmp_path / "cfg.yaml")])
    assert ok.exit_code == ExitCode.OK, ok.output


#: the token limit of the dry run below (a config's default is 256)
DRY_RUN_LIMIT = 32


def dry_run() -> list[AudioPrompt]:
    """The requests of a small dry run (worded unlike the builder's probes): a factual question and a two-option
    question in both orders, each with its clip, another clip, silence and no audio; and a free-form one."""
    t = np.arange(2 * 16_000) / 16_000
    clips = [(0.3 * np.sin(2 * np.pi * f * t)).astype(np.float32) for f in (220.0, 550.0)]
    audio = [clips[0], clips[1], np.zeros_like(clips[0]), None]
    mcq = "Question: Is this recording {}?\nOptions:\n(A) {}\n(B) {}\nThe correct answer is:"
    prompts = ["What instruments are playing in this clip?", mcq.format("fast or slow", "slow", "fast"),
               mcq.format("fast or slow", "fast", "slow"), "Describe the mood of this track."]
    return [AudioPrompt(a, 16_000, p) for p in prompts for a in audio]


@pytest.mark.parametrize("family", FAMILIES)
def test_ends_answers_ends_every_answer_of_a_dry_run(tmp_path: Path, family: str) -> None:
    from evalcore.models.audio_chat import answer_view
    from evalcore.models.hf_audio import HFAudioLM

    if family == "voxtral":
        pytest.importorskip("mistral_common")
    ckpt = tmp_path / family
    res = runner.invoke(app, ["make-checkpoint", family, str(ckpt), "--ends-answers"])
    assert res.exit_code == ExitCode.OK, res.output
    answers = HFAudioLM(checkpoint=str(ckpt), max_new_tokens=DRY_RUN_LIMIT).generate(dry_run())
    assert all(isinstance(a, str) for a in answers), [answer_view(a) for a in answers]  # none cut at the limit
    assert len(set(answers)) >= 2, answers  # the inputs still matter


def test_quiet_prints_nothing_not_even_the_libraries_progress_bars(tmp_path: Path) -> None:
    """A command of its own (the libraries' progress bars are set up on their first import): nothing printed."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "evalcore.cli", "make-checkpoint", "glmasr", str(tmp_path / "c"),
                          "--quiet"], capture_output=True, text=True, timeout=600)
    assert res.returncode == ExitCode.OK and (res.stdout, res.stderr) == ("", ""), res.stderr[-2000:]
    assert (tmp_path / "c" / "config.json").is_file()


@pytest.mark.parametrize("family,prepare,says", [
    ("qwen3_audio", None, "FAMILY: 'qwen3_audio' is not one of qwen2_audio, "),
    ("glmasr", "file", "exists and is not an empty directory"),
])
def test_mistakes_exit_2_with_one_line(tmp_path: Path, family, prepare, says) -> None:
    out = tmp_path / "ckpt"
    if prepare == "file":
        out.mkdir()
        (out / "something").write_text("x")
    res = runner.invoke(app, ["make-checkpoint", family, str(out)])
    assert res.exit_code == ExitCode.USAGE, res.output
    (line,) = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert says in line and "Traceback" not in res.output
    assert prepare == "file" or not out.exists()  # nothing written
