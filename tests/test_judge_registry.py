"""A judge is one file plus its registration: ``evalcore/judges/_toy_first_letter.py`` registers ``toy_first_letter``
and nothing else in evalcore names it, yet the config accepts it and checks its params, ``evalcore validate``
names a bad param in one line, and the judge stage runs it through the :class:`Judge` protocol. The registries
load their own package on first use (nothing is imported by a string elsewhere, no ``__init__`` lists modules),
a name is written once, and importing the command line loads no registry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.runconfig.config import parse_config
from evalcore.core.errors import ExitCode
from evalcore.judges import _toy_first_letter  # noqa: F401  (the toy: private, so only its test registers it)
from evalcore.judges.base import JUDGES, Judge, JudgeBase, build_judge
from evalcore.pipeline.run import protocol_judges
from evalcore.pipeline.stages import JUDGED, judge_batch
from evalcore.core.registry import Registry

REPO = Path(__file__).resolve().parents[1]
OPTS = ["a violin", "a piano", "drums"]


def _cfg(judge: dict) -> dict:
    return {"name": "toy", "datasets": [{"name": "synth", "kind": "synthetic", "params": {"n_clips": 3}}],
            "models": [{"name": "prior", "kind": "text_prior"}],
            "protocols": [{"name": "mcq", "conditions": ["correct"], "judge": judge}]}


def test_the_toy_is_one_file_named_nowhere_else():
    named = [str(p.relative_to(REPO)) for p in (REPO / "evalcore").rglob("*.py") if "toy_first_letter" in p.read_text()]
    assert named == ["evalcore/judges/_toy_first_letter.py"]
    judge = build_judge("toy_first_letter")
    assert isinstance(judge, Judge) and judge.name == "toy_first_letter" and "toy_first_letter" in JUDGES.names()


def test_the_config_accepts_the_toy_and_the_stage_runs_it():
    cfg = parse_config(_cfg({"kind": "toy_first_letter", "params": {"lowercase": True}}))
    judges = protocol_judges(cfg)
    assert judges == {"mcq": ("toy_first_letter", json.dumps({"lowercase": True}))}
    texts = ["B) a piano", "b. the piano", "I think C", None]
    rows = [{f.name: None for f in JUDGED} | {"request_id": f"r{i}", "protocol": "mcq", "text": t, "options": OPTS,
                                              "model": "m", "condition": "correct", "variant": "v", "dataset": "d",
                                              "item_id": f"i{i}", "option_order": 0}
            for i, t in enumerate(texts)]
    judged = judge_batch(pa.Table.from_pylist(rows, schema=JUDGED), judges).to_pylist()
    assert [r["parsed_index"] for r in judged] == [1, 1, -1, None]
    assert [r["judge"] for r in judged[:3]] == ["toy_first_letter@1"] * 3
    assert judged[3]["error"] == "no response" and judged[3]["error_stage"] == "judge"


def test_validate_names_the_toy_s_bad_param_in_one_line(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(_cfg({"kind": "toy_first_letter", "params": {"lowercse": True}})))
    res = CliRunner().invoke(app, ["validate", "--no-check-paths", str(path)])
    assert res.exit_code == ExitCode.USAGE, res.output
    lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
    assert lines == ["invalid run config:",
                     "protocols.0.judge.params.lowercse: unknown field; did you mean 'lowercase'?"], res.stderr


def test_a_judge_that_is_no_judge_fails_when_built():
    class NoVersion:  # no JudgeBase: lacks version, uses_tasks, uses_questions
        def judge(self, texts, options, tasks=None, questions=None):
            return [{"parsed_index": -1} for _ in texts]

    JUDGES.register("not_a_judge")(NoVersion)
    try:
        with pytest.raises(TypeError, match="not_a_judge.*lacks version, uses_tasks, uses_questions"):
            build_judge("not_a_judge")
    finally:
        del JUDGES._factories["not_a_judge"]


def test_a_name_is_written_once_and_loaded_on_first_use():
    reg: Registry[JudgeBase] = Registry("judge", "evalcore.judges")
    assert not reg._loaded

    @reg.register("mine")
    class Mine(JudgeBase):
        pass

    assert Mine.name == "mine"
    with pytest.raises(ValueError, match="registered twice"):
        reg.register("mine")(type("Other", (JudgeBase,), {}))
    with pytest.raises(ValueError, match="the registration is the only place"):
        reg.register("theirs")(type("Named", (JudgeBase,), {"name": "other"}))
    assert "mine" in reg and reg._loaded  # the first read imported the package's modules
    with pytest.raises(KeyError, match="unknown judge 'nope'; known: "):
        reg.get("nope")


def test_importing_the_command_line_loads_no_registry_and_the_toys_stay_private():
    code = ("import evalcore.cli\n"
            "from evalcore.datasets.base import DATASETS\nfrom evalcore.judges.base import JUDGES\n"
            "from evalcore.textmetrics.freeform_metric import METRICS\nfrom evalcore.models.base import MODELS\n"
            "print([r.kind for r in (DATASETS, MODELS, JUDGES, METRICS) if r._loaded])\n"
            # loaded: every module but the private toys, which only their tests import
            "print(sorted(n for r in (JUDGES, METRICS) for n in r.names() if n.startswith('toy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["[]", "[]"]
