"""``--help`` reads whole: no command's help is cut by the source's line breaks, every argument and option is
described; and ``evalcore compare`` refuses runs of different suites with one line (exit 2) instead of an empty
table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import typer.main
import yaml
from typer.testing import CliRunner

from evalcore.cli import app, unwrapped
from evalcore.errors import ExitCode

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


@pytest.fixture(scope="module")
def finished(tmp_path_factory, local_ray) -> Path:
    """A finished tiny run (synthetic clips, the DSP listener, factual QA)."""
    root = tmp_path_factory.mktemp("cmp")
    cfg = {"name": "cmp", "storage": {"root": str(root / "a")}, "stats": {"bootstrap_resamples": 100},
           "datasets": [{"name": "synth", "kind": "synthetic", "params": {"n_clips": 3, "seconds": 1.0}}],
           "models": [{"name": "listener", "kind": "dsp_listener"}], "protocols": [{"name": "factual"}],
           "ray": {"progress_bars": False, "decode_num_cpus": 0.5}}
    (root / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    res = runner.invoke(app, ["run", "--quiet", str(root / "cfg.yaml")])
    assert res.exit_code == ExitCode.OK, res.output
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
