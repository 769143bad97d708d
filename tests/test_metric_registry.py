"""A free-form metric is one file plus its registration: ``evalcore/textmetrics/registered/_toy_recall.py`` registers
``toy_recall`` (a settings model, a definition, a scorer), only this test imports it, and nothing else in evalcore
names it, yet the config accepts it and checks
its settings field by field, ``evalcore validate`` names a bad field in one line, and a run scores it, states its
definition in the summary and its direction in run.json."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.runconfig.config import ConfigError, parse_config
from evalcore.core.errors import ExitCode
from evalcore.textmetrics.metric_config import FreeformMetrics, registered
from evalcore.textmetrics.registered import _toy_recall as toy_metric

REPO = Path(__file__).resolve().parents[1]
BASE = {"name": "toy", "datasets": [{"name": "synth", "kind": "synthetic", "params": {"n_clips": 3}}],
        "models": [{"name": "prior", "kind": "text_prior"}]}


def _cfg(metrics: dict, root: str | None = None) -> dict:
    cfg = {**BASE, "protocols": [{"name": "freeform", "conditions": ["correct", "random"], "metrics": metrics}],
           "stats": {"bootstrap_resamples": 100}, "ray": {"progress_bars": False}}
    return {**cfg, "storage": {"root": root}} if root else cfg


def test_the_registry_is_the_list_of_names():
    assert "toy_recall" in registered()
    assert "toy_recall" not in FreeformMetrics().names  # not a default metric: the default is the registry's
    cfg = parse_config(_cfg({"names": ["bleu", "toy_recall"], "toy_recall": {"min_length": 3}}))
    settings = cfg.protocols[0].freeform_metrics().settings("toy_recall")
    assert isinstance(settings, toy_metric.ToyRecallParams) and settings.min_length == 3
    with pytest.raises(ConfigError, match=r"protocols\.0\.metrics\.names: unknown metric\(s\) \['toy_recal'\]"):
        parse_config(_cfg({"names": ["toy_recal"]}))


def test_reading_the_metrics_imports_no_mir_rule_and_no_scorer():
    """The free-form metrics are a package of their own: reading ``METRICS`` and building BLEU imports none of
    CMI-Bench's rules nor their libraries (mir_eval, jiwer, num2words), nor a scorer or a judge."""
    code = ("import sys\n"
            "from evalcore.textmetrics.freeform_metric import METRICS\n"
            "names = METRICS.names()\n"
            "bleu = METRICS.get('bleu')('bleu', 'mullama')\n"
            "print(names, bleu.definition())\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mir_eval', 'jiwer', 'num2words')\n"
            "             or m.startswith(('evalcore.mir_rules', 'evalcore.scorers', 'evalcore.judges'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    read, loaded = out.stdout.splitlines()[:2]
    assert "'bleu'" in read and "sentence_bleu" in read  # the registry was read and BLEU built
    assert loaded == "[]"


@pytest.mark.parametrize("settings, line", [
    ({"min_length": 0}, "protocols.0.metrics.toy_recall.min_length: must be >= 1, got 0"),
    ({"min_lenght": 2}, "protocols.0.metrics.toy_recall.min_lenght: unknown field; did you mean 'min_length'?"),
])
def test_validate_names_the_bad_field_of_the_toy_in_one_line(tmp_path, settings, line):
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(_cfg({"names": ["bleu", "toy_recall"], "toy_recall": settings})))
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert res.exit_code == ExitCode.USAGE, res.output
    lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
    assert lines == ["invalid run config:", line], res.stderr


def test_validate_passes_the_toy(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(_cfg({"names": ["bleu", "toy_recall"], "toy_recall": {"lowercase": False}})))
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert res.exit_code == 0, res.output


@pytest.mark.ray
def test_a_run_reports_the_toy_metric(tmp_path, local_ray):
    from evalcore.pipeline.run import run

    cfg = parse_config(_cfg({"names": ["bleu", "toy_recall"], "toy_recall": {"min_length": 2}}, str(tmp_path / "run")))
    result = run(cfg)
    per_item = pq.read_table(tmp_path / "run" / "tables" / "per_item.parquet").to_pandas()
    free = per_item[per_item["protocol"] == "freeform"]
    assert len(free) > 0 and result.report
    metric = toy_metric.ToyRecall("toy_recall", "mullama", toy_metric.ToyRecallParams(min_length=2))
    want, _, _ = metric.score(free["reference"].tolist(), free["text"].tolist(), [None] * len(free), None, {})
    assert free["toy_recall"].tolist() == pytest.approx(want) and not any(math.isnan(v) for v in want)
    summary = pq.read_table(tmp_path / "run" / "tables" / "summary.parquet").to_pandas()
    rows = summary[(summary["metric"] == "toy_recall") & (summary["kind"] == "value")]
    assert len(rows) and rows["definition"].str.contains("toy word recall", regex=False).all()
    assert rows["definition"].str.contains("min_length=2", regex=False).all()
    meta = json.loads(Path(tmp_path / "run" / "run.json").read_text())
    assert meta["scoring"]["freeform"]["directions"]["toy_recall"] == "higher is better"
