"""A run beside the paper (`reproduces: paper/table`): each published cell next to the run's value and CI, the
difference, whether the published value lies inside the CI, and the cells the run could not give, named with
the reason. Unit-level on a hand-made summary, then end to end on the released-format fixtures (the factual
paper's true/false config, weight-free stand-ins for its Music LMs) with hand-set published values; the report
is opened in headless Chromium."""

from __future__ import annotations

import csv
import json
import pathlib

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

import chromium
from evalcore.cli import app
from evalcore.reports.published import COLUMNS, Cell, read
from evalcore.reports.reproduction import reproduction, section

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


@pytest.mark.ray
def test_a_run_with_reproduces_reports_itself_beside_the_paper(tmp_path, local_ray) -> None:
    from evalcore.config import parse_config
    from evalcore.pipeline.finish import rerender
    from evalcore.pipeline.run import run
    from paper_fixtures import localize, write_data

    write_data(tmp_path)
    cfg = localize(yaml.safe_load((REPO / "configs" / "paper" / "factual-table08-09-true-false.yaml").read_text()),
                   tmp_path, tmp_path / "out", "http://127.0.0.1:9/v1", "UNUSED_KEY", {})
    table8 = [c for c in read() if c.key == "factual/table8"]
    mine = tmp_path / "published.csv"  # the paper's table 8 keys, values set by hand
    with open(mine, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for c in table8:
            w.writerow([getattr(c, k) if k != "value" else "0.5" for k in COLUMNS])
    cfg.update(reproduces="factual/table8", published_values=str(mine))
    result = run(parse_config(cfg))
    root = pathlib.Path(result.root)
    rep = pq.read_table(root / "tables" / "reproduction.parquet").to_pandas()
    assert len(rep) == len(table8) and (rep["published"] == 0.5).all()
    done = rep[rep["status"] == "compared"]
    summary = pq.read_table(root / "tables" / "summary.parquet").to_pandas()
    assert len(done) > 0 and set(done["model"]) <= set(summary["model"])
    for r in done.itertuples():
        ours = summary[(summary["model"] == r.model) & (summary["condition"] == r.condition)
                       & (summary["metric"] == r.metric) & (summary["group"] == "all")
                       & (summary["kind"] == "value")]["value"]
        assert ours.iloc[0] == pytest.approx(r.ours) and r.difference == pytest.approx(r.ours - 0.5)
        assert r.inside_ci == (r.ci_low <= 0.5 <= r.ci_high)
    # what the stand-ins cannot give is named, not dropped
    assert (rep["status"] == "compared").sum() + (rep["status"] != "compared").sum() == len(table8)
    report = (root / "report.md").read_text()
    assert "## Beside the paper: factual/table8" in report and f"of {len(table8)} published cells compared" in report
    assert json.loads((root / "run.json").read_text())["reproduces"] == "factual/table8"
    assert "## Beside the paper: factual/table8" in rerender(str(root))  # evalcore report renders it again
    page = root / "report.html"
    assert "Beside the paper" in chromium.dump_dom(page, tmp_path / "profile")
    scroll, client = chromium.widths(page, tmp_path)
    assert scroll <= client, f"report.html overflows a 1280 px window: {scroll} > {client}"


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
    for args, field in ((["factual/table99"], "PAPER/TABLE"), (["factual/table8", "--published-values",
                                                               str(tmp_path / "none.csv")], "--published-values")):
        res = CliRunner().invoke(app, ["reproduce", str(tmp_path / "s"), *args])
        assert res.exit_code == 2 and field in res.output, res.output
    res = CliRunner().invoke(app, ["reproduce", str(tmp_path), "factual/table8"])
    assert res.exit_code == 2 and "OUTPUTS" in res.output
