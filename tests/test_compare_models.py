"""``evalcore compare`` keeps the models of a run apart (model is part of every key, models paired by name, a model
of one run only listed, never mixed in), and a refusal names what differs between the runs' suites and the flag
to use. Unit-level: the run roots are written here (config, items, summary and per-item tables), nothing runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.core.errors import ExitCode
from evalcore.nightly import compare

runner = CliRunner()
N = 20


def _root(path: Path, scores: dict[str, list[float]], items: int = N, bootstrap: int = 100,
          definition: str = "factual F1 (lexicon)") -> Path:
    """A finished run's files as compare reads them: model → per-item factual F1 (condition correct)."""
    (path / "items").mkdir(parents=True)
    (path / "tables").mkdir()
    cfg = {"name": path.name, "models": [{"name": m, "kind": "dsp_listener"} for m in scores],
           "datasets": [{"name": "d", "kind": "synthetic"}], "protocols": [{"name": "factual"}],
           "stats": {"bootstrap_resamples": bootstrap}}
    (path / "config.yaml").write_text(yaml.safe_dump(cfg))
    ids = [f"i{i:02d}" for i in range(items)]
    pq.write_table(pa.table({"dataset": ["d"] * items, "item_id": ids, "question": ["Which instruments?"] * items}),
                   path / "items" / "part-00000.parquet")
    pq.write_table(pa.table({"metric": ["f1"], "definition": [definition]}), path / "tables" / "summary.parquet")
    rows = [{"model": m, "protocol": "factual", "dataset": "d", "condition": "correct", "variant": "default",
             "task": "instrument", "item_id": i, "clip_id": i, "f1": v} for m, vs in scores.items()
            for i, v in zip(ids, vs)]
    pq.write_table(pa.Table.from_pandas(pd.DataFrame(rows), preserve_index=False), path / "tables" / "per_item.parquet")
    return path


LISTENER = [0.4 if i % 2 else 1.0 for i in range(N)]  # the same listener in both runs (mean 0.7)


def test_a_multi_model_run_is_compared_model_by_model(tmp_path) -> None:
    """Finding 1: RUN_A holds the listener and the text prior (F1 0), RUN_B the same listener alone. Mixed, the
    reference was 0.35 and the listener "improved"; kept apart it is unchanged and the text prior is listed."""
    a = _root(tmp_path / "a", {"listener": LISTENER, "text-prior": [0.0] * N})
    b = _root(tmp_path / "b", {"listener": LISTENER})
    rows = compare.decide(compare.compare_scores(compare.load_scores(str(b)), compare.load_scores(str(a)), 200,
                                                 0.95, 0), lambda _m: 0.05, 0.05)
    (row,) = rows.itertuples()
    assert (row.model, row.reference_model, row.n) == ("listener", "listener", N)
    assert row.delta == 0 and row.value == row.reference_value == pytest.approx(0.7) and not row.improved
    assert compare.unpaired(compare.load_scores(str(b)), compare.load_scores(str(a))) == ([], ["text-prior"])

    res = runner.invoke(app, ["compare", str(a), str(b), "--out", str(tmp_path / "ab"), "--resamples", "200"])
    assert res.exit_code == ExitCode.OK, res.output
    md = (tmp_path / "ab" / "compare.md").read_text()
    assert "0 of 1 comparisons flagged, 0 improved" in md
    assert "**Not compared**" in md and "text-prior in RUN_A only" in md
    assert "| model |" in md and "| listener |" in md  # the table names the model
    assert list(pd.read_parquet(tmp_path / "ab" / "compare.parquet")["model"]) == ["listener"]
    # the terminal gets plain lines (the count, the flagged ones, the files), not compare.md's Markdown
    out = res.stdout.splitlines()
    assert out[0].startswith("compare: 0 of 1 comparisons flagged, 0 improved") and len(out) == 4
    assert out[1:] == [str((tmp_path / "ab" / f).resolve()) for f in ("compare.md", "compare.html", "compare.parquet")]
    assert "**" not in res.stdout and "|" not in res.stdout


def test_compare_prints_each_flagged_comparison_in_one_plain_line(tmp_path) -> None:
    """A drop is flagged on the terminal in one line (model, protocol, condition, metric, difference with its CI, n,
    p); ``--quiet`` prints those lines only."""
    a = _root(tmp_path / "a", {"listener": [1.0] * N})
    b = _root(tmp_path / "b", {"listener": [0.0] * N})
    res = runner.invoke(app, ["compare", str(a), str(b), "--out", str(tmp_path / "ab"), "--resamples", "200"])
    assert res.exit_code == ExitCode.OK, res.output
    first, flagged, *files = res.stdout.splitlines()
    assert first.startswith("compare: 1 of 1 comparisons flagged, 0 improved") and len(files) == 3
    assert flagged == "flagged: listener · factual · d · correct · f1: -1.00 [-1.00, -1.00], n=20, p (Holm) < 0.001"
    quiet = runner.invoke(app, ["compare", str(a), str(b), "--out", str(tmp_path / "q"), "--resamples", "200",
                                "--quiet"])
    assert quiet.stdout.splitlines() == [flagged]


def test_models_pair_by_name_and_one_model_runs_pair_whatever_their_names() -> None:
    assert compare.model_pairs(["a", "b"], ["b", "c"]) == [("b", "b")]
    assert compare.model_pairs(["step-2"], ["step-1"]) == [("step-2", "step-1")]  # a checkpoint series' runs
    assert compare.model_pairs(["a", "b"], ["c", "d"]) == []  # nothing is guessed


def test_a_refusal_names_what_differs_and_the_flag(tmp_path) -> None:
    """Issue 42, point 3: runs of different suites are refused with what differs (items only in one run with
    counts, config fields, metric definitions) and ``--shared-items``."""
    a = _root(tmp_path / "a", {"listener": LISTENER})
    b = _root(tmp_path / "b", {"listener": LISTENER + [1.0] * 3}, items=N + 3, bootstrap=200,
              definition="factual F1 (lexicon v2)")
    res = runner.invoke(app, ["compare", str(a), str(b), "--out", str(tmp_path / "ab")])
    assert res.exit_code == ExitCode.USAGE, res.output
    (line,) = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert "different suites" in line and line.endswith("add --shared-items to compare the items they share")
    assert "3 item(s) only in RUN_B (d/i20, d/i21, d/i22)" in line
    assert "config stats.bootstrap_resamples: 100 ≠ 200" in line
    assert 'metric f1: definition "factual F1 (lexicon)" ≠ "factual F1 (lexicon v2)"' in line
    c = _root(tmp_path / "c", {"listener": LISTENER}, definition="paired difference correct − silence")
    res = runner.invoke(app, ["compare", str(a), str(c), "--out", str(tmp_path / "ac")])
    assert "correct − silence" in res.stderr and "\\u2212" not in res.stderr  # the definition as written
    assert "item(s) only in RUN_A" not in line and "config name" not in line  # the name is not the suite's
