"""``--help`` reads whole: no command's help is cut by the source's line breaks, every argument and option is
described; and ``evalcore compare`` refuses runs of different suites with one line (exit 2) instead of an empty
table."""

from __future__ import annotations

import importlib.util
import logging
import shutil
import socket
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import typer.main
import yaml
from typer.testing import CliRunner

from evalcore.cli import app, unwrapped
from evalcore.core.errors import ExitCode

runner = CliRunner()


def _commands(cmd, path=()):
    """(path, click command) of every command and group under ``cmd``."""
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        yield from _commands(sub, (*path, name))
    yield path, cmd


ALL = list(_commands(typer.main.get_command(app)))


def test_every_command_is_there() -> None:
    names = {" ".join(p) for p, _ in ALL}
    assert {"run", "validate", "compare", "nightly", "make-checkpoint", "score", "score mcq"} <= names


#: commands whose output is the whole answer (a schema), and groups; the rest do work and take --quiet
NOT_QUIET = {"", "score", "schema", "compare"}  # compare: its refusals and page are being reworked (compare_cli.py)


def test_every_command_that_does_work_has_quiet() -> None:
    lacking = [" ".join(p) for p, cmd in ALL if " ".join(p) not in NOT_QUIET
               and "--quiet" not in {o for param in cmd.params for o in getattr(param, "opts", [])}]
    assert lacking == []
    assert {"run", "nightly", "validate", "report", "reproduce", "make-checkpoint", "score mcq", "score factual",
            "score freeform"} <= {" ".join(p) for p, _ in ALL} - NOT_QUIET


@pytest.mark.parametrize("path,cmd", ALL, ids=[" ".join(p) or "evalcore" for p, _ in ALL])
def test_help_has_no_line_break_inside_a_paragraph_and_every_option_is_described(path, cmd) -> None:
    for para in (cmd.help or "").split("\n\n"):
        for line in para.splitlines()[1:]:
            assert line.lstrip().startswith(("* ", "- ", "• ")), f"{' '.join(path)}: a break inside {para!r}"
    for p in cmd.params:
        if p.name != "help":
            assert getattr(p, "help", None), f"{' '.join(path)} {p.opts or p.name}: no description"
            assert "\n" not in p.help


def test_the_rendered_help_keeps_sentences_whole() -> None:
    res = runner.invoke(app, ["compare", "--help"], terminal_width=400, env={"COLUMNS": "400"})
    assert res.exit_code == 0
    text = " ".join(res.output.split())
    assert "Holm-adjusted p-values (each row names its test), flagged drops" in text
    for option in ("--resamples", "--seed", "--min-effect", "--alpha", "--shared-items"):
        line = next(ln for ln in res.output.splitlines() if ln.lstrip("│ ").startswith(option))
        assert len(line.split(option, 1)[1].strip(" │")) > 20, line  # described, not just a type


def test_unwrapped_joins_lines_but_keeps_paragraphs_and_list_items() -> None:
    doc = """First line
    goes on.

    Second paragraph:
    * one
    * two
      continued"""
    assert unwrapped(doc) == "First line goes on.\n\nSecond paragraph:\n* one\n* two continued"


# ----------------------------------------------------------------------------- compare: one suite


#: the evalcore log's warnings during the ``finished`` run
RUN_WARNINGS: list[str] = []


@pytest.fixture(scope="module")
def finished(tmp_path_factory, local_ray) -> Path:
    """A finished tiny run (synthetic clips, the DSP listener, factual QA). Its config sends it to trackers
    (docs/tracking.md): a local MLflow store, an MLflow URI nothing listens on, a W&B that is not installed here, and
    lm-eval's files (``--track``)."""
    root = tmp_path_factory.mktemp("cmp")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    tracking = [{"kind": "mlflow", "uri": f"http://127.0.0.1:{closed}", "retries": 0}, {"kind": "wandb"}]
    if importlib.util.find_spec("mlflow") is not None:
        from tracking_helpers import fresh_mlflow_uri

        tracking.insert(0, {"kind": "mlflow", "uri": fresh_mlflow_uri(root / "mlflow"), "experiment": "cmp"})
    cfg = {"name": "cmp", "storage": {"root": str(root / "a")}, "stats": {"bootstrap_resamples": 100},
           "datasets": [{"name": "synth", "kind": "synthetic", "params": {"n_clips": 3, "seconds": 1.0}}],
           "models": [{"name": "listener", "kind": "dsp_listener"}], "protocols": [{"name": "factual"}],
           "ray": {"progress_bars": False, "decode_num_cpus": 0.5}, "tracking": tracking}
    (root / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    heard = logging.Handler(logging.WARNING)
    heard.emit = lambda record: RUN_WARNINGS.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("evalcore").addHandler(heard)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setitem(sys.modules, "wandb", None)  # W&B not installed
            res = runner.invoke(app, ["run", "--quiet", str(root / "cfg.yaml"), "--track", "lm_eval"])
    finally:
        logging.getLogger("evalcore").removeHandler(heard)
    assert res.exit_code == ExitCode.OK, res.output  # failing trackers cost the run nothing
    return root / "a"


def _other_suite(run: Path, out: Path, rename_items: bool = False) -> Path:
    """A copy of ``run`` whose config differs apart from its models (another suite); with ``rename_items`` its
    items (and their scores) carry other ids, so the two runs share no item."""
    shutil.copytree(run, out)
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    cfg["stats"]["bootstrap_resamples"] = 200
    (out / "config.yaml").write_text(yaml.safe_dump(cfg))
    if rename_items:
        for f in [*(out / "items").rglob("*.parquet"), out / "tables" / "per_item.parquet"]:
            t = pq.read_table(f)
            ids = [f"other-{x}" for x in t.column("item_id").to_pylist()]
            pq.write_table(t.set_column(t.schema.get_field_index("item_id"), "item_id", [ids]), f)
    return out


def test_runs_of_different_suites_exit_2_with_one_line(finished, tmp_path) -> None:
    other = _other_suite(finished, tmp_path / "b")
    res = runner.invoke(app, ["compare", str(finished), str(other), "--out", str(tmp_path / "ab")])
    assert res.exit_code == ExitCode.USAGE, res.output
    (line,) = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert "different suites" in line and "--shared-items" in line
    assert not (tmp_path / "ab").exists()
    shared = runner.invoke(app, ["compare", str(finished), str(other), "--shared-items", "--out", str(tmp_path / "s")])
    assert shared.exit_code == ExitCode.OK, shared.output
    assert "The suites differ" in (tmp_path / "s" / "compare.md").read_text()
    same = runner.invoke(app, ["compare", str(finished), str(finished), "--out", str(tmp_path / "aa")])
    assert same.exit_code == ExitCode.OK, same.output


def test_runs_that_share_no_item_exit_2_even_with_shared_items(finished, tmp_path) -> None:
    other = _other_suite(finished, tmp_path / "c", rename_items=True)
    res = runner.invoke(app, ["compare", str(finished), str(other), "--shared-items", "--out", str(tmp_path / "x")])
    assert res.exit_code == ExitCode.USAGE, res.output
    (line,) = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert line.startswith("RUN_A and RUN_B share no item") and "nothing to compare" in line


# ----------------------------------------------------------------------------- the run's trackers


def test_the_run_sent_itself_to_its_trackers_and_the_failing_ones_are_one_warning_each(finished) -> None:
    """A real ``evalcore run`` with sinks: every headline cell of summary.parquet is its MLflow metric (MLflow's own
    client reads it back), with the params and artifacts; lm-eval's files are written; the unreachable MLflow and the
    missing W&B are one warning each, and every file of the run is there."""
    for name in ("config.yaml", "run.json", "report.md", "report.html", "tables/summary.parquet",
                 "tables/per_item.parquet", "tables/errors.parquet"):
        assert (finished / name).is_file(), name
    assert len(RUN_WARNINGS) == 2, RUN_WARNINGS
    mlflow_said = ("mlflow sink failed (MlflowException" if importlib.util.find_spec("mlflow") is not None
                   else "mlflow sink skipped: needs mlflow")
    assert any(mlflow_said in w and "evalcore track" in w for w in RUN_WARNINGS)
    from evalcore.core.packages import install

    assert any("wandb sink skipped: needs wandb" in w and install("tracking") in w for w in RUN_WARNINGS)
    assert next((finished / "lm_eval" / "listener").glob("results_*.json"))
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    from tracking_helpers import expected_cells, mlflow_runs, same

    summary = pd.read_parquet(finished / "tables" / "summary.parquet")
    uri = mlflow_uri_of(finished)
    (r,) = mlflow_runs(uri, "cmp")
    want = expected_cells(summary, "listener")
    assert len(want) >= 20 and set(r.data.metrics) == set(want)
    assert all(same(float(v), r.data.metrics[k]) for k, v in want.items())
    assert {"evalcore.version", "config.hash", "seeds.bootstrap", "checkpoint.checkpoint", "judge.factual",
            "prompt.factual", "dataset.synth", "definition.f1_micro"} <= set(r.data.params)
    assert r.data.tags["evalcore.model"] == "listener" and r.data.tags["evalcore.run_root"] == str(finished)
    arts = MlflowClient(tracking_uri=uri).list_artifacts(r.info.run_id)
    assert {a.path for a in arts} == {"report.html", "summary.parquet", "per_item.parquet"}


def mlflow_uri_of(run_root: Path) -> str:
    """The local store the run's config named first (its config.yaml keeps the tracking block)."""
    return yaml.safe_load((run_root / "config.yaml").read_text())["tracking"][0]["uri"]
