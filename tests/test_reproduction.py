"""A run beside the paper (`reproduces: paper/table`): each published cell next to the run's value and CI, the
difference, whether the published value lies inside the CI, and the cells the run could not give, named with
the reason. Unit-level on a hand-made summary and on `evalcore score` outputs; end to end, in the paper configs'
shared run (tests/test_paper_configs.py::test_the_run_reports_itself_beside_the_paper)."""

from __future__ import annotations

import pathlib

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.reports.published import COLUMNS, Cell, read
from evalcore.reports.reproduction import reproduction, section, tables_named

REPO = pathlib.Path(__file__).resolve().parents[1]


def _cell(**kw: str) -> Cell:
    base = {c: "" for c in COLUMNS}
    base.update(paper="factual", table="table8", protocol="true-false", dataset="musicnet", model="ltu-as",
                condition="correct", variant="default", group="all", metric="precision_any", value="0.182")
    base.update(kw)
    return Cell(**base)


def _summary() -> pd.DataFrame:
    row = {"protocol": "true-false", "protocol_kind": "true_false", "dataset": "musicnet", "model": "ltu-as",
           "condition": "correct", "variant": "default", "group": "all", "kind": "value", "metric": "precision_any",
           "value": 0.2, "ci_low": 0.15, "ci_high": 0.25, "n": 40, "definition": "d"}
    return pd.DataFrame([row, {**row, "condition": "random", "value": 0.5, "ci_low": 0.45, "ci_high": 0.55},
                         {**row, "metric": "recall_any", "value": float("nan"), "ci_low": float("nan"),
                          "ci_high": float("nan"), "n": 0}])


def test_each_published_cell_is_beside_ours_or_named_as_not_run() -> None:
    cells = [_cell(), _cell(condition="random", value="30.0", unit="%"), _cell(model="salmonn-7b", value="0.3"),
             _cell(metric="jaccard_any", value="0.167"), _cell(metric="recall_any", value="0.67")]
    rep = reproduction(_summary(), cells).set_index(["model", "condition", "metric"])
    hit = rep.loc[("ltu-as", "correct", "precision_any")]
    assert hit["status"] == "compared" and hit["ours"] == 0.2 and hit["published"] == pytest.approx(0.182)
    assert hit["difference"] == pytest.approx(0.018) and bool(hit["inside_ci"]) and hit["n"] == 40
    pct = rep.loc[("ltu-as", "random", "precision_any")]  # 30.0 % is 0.30 as a share: outside [0.45, 0.55]
    assert pct["published"] == pytest.approx(0.30) and pct["printed"] == "30.0%" and not bool(pct["inside_ci"])
    assert rep.loc[("salmonn-7b", "correct", "precision_any"), "status"] == \
        "not run: model 'salmonn-7b' is not in this run"
    assert rep.loc[("ltu-as", "correct", "jaccard_any"), "status"] == "not run: metric 'jaccard_any' is not in this run"
    assert rep.loc[("ltu-as", "correct", "recall_any"), "status"] == "no value (nothing scored)"
    md = section(reproduction(_summary(), cells), "factual/table8", 0.95)
    assert "2 of 5 published cells compared; the published value lies inside our 95 % CI in 1 of them" in md
    assert "| ltu-as | true-false · musicnet | correct | default | precision_any | 0.182 | 0.200 [0.150, 0.250] " \
           "| +0.018 | yes |" in md
    assert "* not run: model 'salmonn-7b' is not in this run — 1 cell(s): salmonn-7b true-false correct" in md


def test_prose_numbers_join_where_the_run_computes_them() -> None:
    """A paper's ``text`` cells beside the run only where it computes them: a model cell by its key, a count of
    questions (``items``) and its share (``items_share``) from the summary's n; an upper bound has no "inside CI"."""
    s = _summary()
    groups = pd.DataFrame([{**s.iloc[0].to_dict(), "metric": "accuracy_with_errors", "group": g, "n": n,
                            "condition": c} for g, n, c in (("all", 40, "correct"), ("difficulty=High", 10, "correct"),
                                                            ("all", 99, "random"))])
    diff = {**s.iloc[0].to_dict(), "kind": "paired_diff", "condition": "correct-random", "value": -0.3,
            "ci_low": -0.4, "ci_high": -0.2}
    summary = pd.concat([s, groups, pd.DataFrame([diff])], ignore_index=True)
    prose = [_cell(table="text", model="any", condition="any", variant="any", metric="items", value="320",
                   quote="It has 320 questions."),
             _cell(table="text", model="any", condition="any", variant="any", group="difficulty=High",
                   metric="items_share", value="17.2", unit="%", quote="Of them 17.2% are high."),
             _cell(table="text", model="any", condition="any", variant="any", group="difficulty=High",
                   metric="items_share", value="30", unit="%", quote="Less than 30% of them.",
                   note='an upper bound ("less than"), not a value'),
             _cell(table="text", model="ltu-as", condition="random", value="0.4", quote="It scores 0.4."),
             _cell(table="text", condition="correct-random", value="0.25", quote="A difference of 0.25."),
             _cell(table="text", model="salmonn-7b", value="0.4", quote="It scores 0.4."),  # not run: left out
             _cell(table="text", model="any", condition="any", variant="any", metric="tracks", value="108",
                   quote="From 108 tracks.")]  # no run counts tracks: left out
    rep = reproduction(summary, [_cell()], prose)
    assert list(rep["table"]) == ["table8"] + ["text"] * 5 and (rep["status"] == "compared").all()
    items, share, bound, model, difference = (r for _, r in rep.iloc[1:].iterrows())
    assert difference["ours"] == -0.3 and difference["inside_ci"] is False  # the paired difference's row
    assert items["ours"] == 40 and items["published"] == 320 and items["inside_ci"] is None
    assert share["ours"] == pytest.approx(0.25) and share["published"] == pytest.approx(0.172)
    assert bound["printed"] == "< 30%" and bound["inside_ci"] is None and bound["difference"] == pytest.approx(-0.05)
    assert model["ours"] == 0.5 and model["quote"] == "It scores 0.4."
    md = section(rep, ["factual/table8"], 0.95)
    assert "1 of 1 published cells compared" in md and "### In the prose" in md
    assert "* items_share (difficulty=High): “Of them 17.2% are high.”" in md
    assert "| items | 320 | 40 | -280 | — |" in md  # a count as a count
    # a text table named itself is compared whole: what the run does not give is named
    named = reproduction(summary, prose)
    assert (named["status"] == "compared").sum() == 5 and len(named) == 7
    assert set(named[named["status"] != "compared"]["status"]) == {"not run: model 'salmonn-7b' is not in this run",
                                                                    "not run: metric 'tracks' is not in this run"}


def test_tables_named_brings_the_papers_prose() -> None:
    cells = read()
    named, prose = tables_named(["factual/table8", "factual/table9"], cells)
    assert {c.key for c in named} == {"factual/table8", "factual/table9"} and len(named) == 48
    assert {c.key for c in prose} == {"factual/text"}
    named, prose = tables_named(["muchomusic/text", "muchomusic/results"], cells)
    assert not prose and [c.key for c in named][:5] == ["muchomusic/text"] * 5


def test_reproduces_takes_one_table_or_a_list(tmp_path) -> None:
    from evalcore.runconfig.config import ConfigError, parse_config

    cfg = yaml.safe_load((REPO / "configs" / "paper" / "factual-table08-09-true-false.yaml").read_text())
    assert parse_config({**cfg, "reproduces": "factual/table8"}).reproduces == ["factual/table8"]
    both = parse_config({**cfg, "reproduces": ["factual/table8", "factual/table9", "muchomusic/results"]})
    assert both.reproduces == ["factual/table8", "factual/table9", "muchomusic/results"]
    assert cfg["reproduces"] == ["factual/table8", "factual/table9"]  # the config's own
    assert parse_config({k: v for k, v in cfg.items() if k != "reproduces"}).reproduces is None
    for bad, words in ((["factual/table8", "factual/table8"], "reproduces: a table named twice"),
                       ([], "reproduces: must not be empty"),
                       (["factual/table8", "Table 9"], "reproduces.1: String should match pattern")):
        with pytest.raises(ConfigError, match=words):
            parse_config({**cfg, "reproduces": bad})
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**cfg, "reproduces": ["factual/table8", "factual/table99"]}))
    res = CliRunner().invoke(app, ["validate", "--no-check-paths", str(path)])
    assert res.exit_code == 2 and "reproduces.1: no published cell of 'factual/table99'" in res.output, res.output


def test_reproduces_must_name_a_published_table(tmp_path) -> None:
    cfg = yaml.safe_load((REPO / "configs" / "paper" / "factual-table08-09-true-false.yaml").read_text())
    for value, expect in (("factual/table99", "reproduces: no published cell of 'factual/table99'"),
                          ("Table 8", "reproduces")):
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump({**cfg, "reproduces": value}))
        res = CliRunner().invoke(app, ["validate", "--no-check-paths", str(path)])
        assert res.exit_code == 2 and expect in res.output, res.output
    path.write_text(yaml.safe_dump({**cfg, "reproduces": "factual/table8"}))
    res = CliRunner().invoke(app, ["validate", "--no-check-paths", str(path)])
    assert res.exit_code == 0, res.output


def test_evalcore_reproduce_sets_a_score_output_beside_the_paper(tmp_path) -> None:
    """`evalcore score factual --format true_false` outputs (no protocol / dataset / condition columns), then
    `evalcore reproduce`: the scored model's cells compared, the others named; mistakes exit 2."""
    from test_score_factual_formats import TRUE_FALSE, _jsonl

    src = _jsonl(tmp_path / "in.jsonl", [{**r, "model": "ltu-as"} for r in TRUE_FALSE])
    res = CliRunner().invoke(app, ["score", "factual", str(src), "--out", str(tmp_path / "s"), "--task", "instrument",
                                   "--format", "true_false", "--resamples", "200", "--quiet"])
    assert res.exit_code == 0 and res.output == "", res.output  # --quiet: the files are the answer
    res = CliRunner().invoke(app, ["reproduce", str(tmp_path / "s"), "factual/table8", "--quiet"])
    assert res.exit_code == 0 and res.output == "", res.output
    assert res.exit_code == 0, res.output
    rep = pq.read_table(tmp_path / "s" / "reproduction.parquet").to_pandas()
    table8 = [c for c in read() if c.key == "factual/table8"]
    assert len(rep) == len(table8)
    done = rep[rep["status"] == "compared"]
    assert set(done["model"]) == {"ltu-as"} and set(done["condition"]) == {"correct"}
    summary = pq.read_table(tmp_path / "s" / "summary.parquet").to_pandas()
    summary = summary[(summary["group"] == "all") & (summary["kind"] == "value")].set_index("metric")
    for r in done.itertuples():
        assert r.ours == pytest.approx(summary.loc[r.metric, "value"])
    assert (rep[rep["model"] != "ltu-as"]["status"].str.startswith("not run: model")).all()
    md = (tmp_path / "s" / "reproduction.md").read_text()
    assert "## Beside the paper: factual/table8" in md
    assert f"`{tmp_path / 's' / 'reproduction.parquet'}` holds every row" in md  # where it is, not tables/
    # several tables at once: each table's cells, one section with a part per table, and the paper's prose after
    res = CliRunner().invoke(app, ["reproduce", str(tmp_path / "s"), "factual/table8", "factual/table9", "--out",
                                   str(tmp_path / "both")])
    assert res.exit_code == 0, res.output
    both = pq.read_table(tmp_path / "both" / "reproduction.parquet").to_pandas()
    assert both.groupby("table").size().to_dict() == {"table8": 24, "table9": 24}  # no prose number is computed
    assert set(both[both["status"] == "compared"]["metric"]) >= {"precision_any", "precision_majority"}
    md = (tmp_path / "both" / "reproduction.md").read_text()
    assert "## Beside the paper: factual/table8, factual/table9" in md and "### factual/table9" in md
    for args, field in ((["factual/table99"], "PAPER/TABLE"), (["factual/table8", "factual/table99"], "table99"),
                        (["factual/table8", "--published-values",
                                                               str(tmp_path / "none.csv")], "--published-values")):
        res = CliRunner().invoke(app, ["reproduce", str(tmp_path / "s"), *args])
        assert res.exit_code == 2 and field in res.output, res.output
    res = CliRunner().invoke(app, ["reproduce", str(tmp_path), "factual/table8"])
    assert res.exit_code == 2 and "OUTPUTS" in res.output
