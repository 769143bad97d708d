"""No answer can stop a run: every model answer is scored or an error row (stage ``score`` or ``judge``, class
``output``, a bounded one-line reason), in bounded time — the scoring guard (evalcore/core/guard.py), the CMI rule
families' caps (evalcore/mir_rules/caps.py), and a seeded corpus of hostile answers (tests/bad_answers.py) run
against every rule family, every offline judge and the free-form metrics (docs/bad_inputs.md, "Bad answers")."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from bad_answers import NAMED, corpus
from evalcore.cli import app
from evalcore.datasets.released_mcq import AudioOutside, audio_uri
from evalcore.core.errors import MAX_REASON_CHARS
from evalcore.core.guard import guarded, one_by_one
from evalcore.mir_rules.caps import CAPS, cut
from evalcore.mir_rules.lyrics import clean_prediction, clean_prediction_released
from evalcore.mir_rules.rules import Rule
from evalcore.scorers.mir import MirScorer, score_batch
from evalcore.scoring.requests import score_requests

runner = CliRunner()
#: the answers the suite generates per family (the benchmark: 100,000)
N = 1_000
GENRES = ["blues", "classical", "country", "disco", "hiphop", "jazz", "metal", "pop", "reggae", "rock"]
#: each rule family's task and a reference in the released format
REFERENCES = {
    "cmi_lyrics": ("DSing", "SOME DAYS I'M RICH"),
    "cmi_beat": ("gtzan_beat", ",".join(f"{0.3 + 0.5 * i:.2f}" for i in range(60))),
    "cmi_melody": ("MedleyDB", str([(f"{10 + k * 0.0058:.4f}", 60 + k % 3) for k in range(200)])),
    "cmi_technique": ("Guzheng_Tech", "[('0.5', '1.5', 'Vibrato'), ('2.0', '3.0', 'Plucks')]"),
    "cmi_key": ("GS_key", "C major"),
    "cmi_multiclass": ("GTZAN", "blues"),
    "cmi_regression": ("EMO_arousal", "0.3"),
    "cmi_tagging": ("MTG_genre", "rock, pop"),
}


def _rows(rule: str, answers: list[str]) -> list[dict]:
    task, reference = REFERENCES[rule]
    meta = json.dumps({"label_set": GENRES}) if rule == "cmi_multiclass" else None
    return [{"request_id": f"{rule}-{i}", "dataset": task, "item_id": f"{task}-{i}", "protocol": "cmi",
             "protocol_kind": "mir", "task": task, "category": rule, "model": "m", "condition": "correct",
             "variant": "default", "option_order": 0, "text": a, "reference": reference, "metadata": meta,
             "error": None, "n_chunks": 1} for i, a in enumerate(answers)]


def _reconciled(rows: list[dict], scored) -> list[dict]:
    """The error rows of ``scored``, after checking in = scored + errored and that each is bounded and classed."""
    errors = [r for r in scored.rows if r.get("error") is not None]
    assert len(scored.per_item) + len(errors) == len(rows)
    for e in errors:
        assert e["error_stage"] == "score" and e["error_class"] in ("output", "input"), e
        assert "\n" not in e["error"] and len(e["error"]) <= MAX_REASON_CHARS
    return errors


@pytest.mark.parametrize("rule", sorted(REFERENCES))
def test_a_thousand_hostile_answers_per_rule_family_scored_or_errored(rule: str) -> None:
    answers = list(corpus(rule, N, seed=0))
    rows = _rows(rule, answers)
    _reconciled(rows, score_requests(rows, scorers={"cmi": MirScorer()}))
    if rule == "cmi_lyrics":  # the linear cleaning gives the released patterns' text on every generated answer
        assert [clean_prediction(a) for a in answers] == [clean_prediction_released(a) for a in answers]


@pytest.mark.parametrize("rule", sorted(NAMED))
def test_the_named_bad_answers_of_each_family(rule: str) -> None:
    """Finding 1 and 2: the answers that stopped a run (a 400-digit word in a lyrics answer: num2words'
    OverflowError; ``"-" * 3000 + "1"`` or ``"1+" * 3000`` in a melody: RecursionError / MemoryError from the
    parser) are error rows of class output; the answers that cost minutes (a 40-KB lyrics answer: the released
    prefix patterns are quadratic; a million beat timestamps) are cut to the family's cap and scored."""
    rows = _rows(rule, NAMED[rule])
    scored = score_requests(rows, scorers={"cmi": MirScorer()})
    errors = _reconciled(rows, scored)
    assert all(e["error_class"] == "output" for e in errors)
    truncated = dict(zip(scored.per_item["request_id"], scored.per_item["truncated"]))
    for r in rows:
        over = len(r["text"]) - CAPS[rule].chars
        if r["request_id"] in truncated and over > 0:
            assert truncated[r["request_id"]] >= over  # cut before parsing, and the cut counted
    if rule == "cmi_lyrics":
        by_id = {e["request_id"]: e["error"] for e in errors}
        assert "too large for num2words" in by_id["cmi_lyrics-0"]
    if rule == "cmi_melody":
        by_id = {e["request_id"]: e["error"] for e in errors}
        assert "nested too deeply" in by_id["cmi_melody-0"] and "nested too deeply" in by_id["cmi_melody-1"]


def test_beat_cap_keeps_whole_timestamps() -> None:
    text, n = cut("cmi_beat", ",".join(["1.25"] * 5000))
    assert text.split(",") == ["1.25"] * 1000 and n == len(",".join(["1.25"] * 5000)) - len(text)
    text, n = cut("cmi_melody", str([("0.5", 60)] * 20_000))
    assert text.endswith(")") and n > 0 and len(text) <= CAPS["cmi_melody"].chars
    assert cut("cmi_key", "C major") == ("C major", 0)


class _Crashing(Rule):
    """A rule with a defect: it raises what no rule expects."""

    name, columns, aggregates = "cmi_key", ("key_score",), ()

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def score(self, response, reference, meta):
        raise self.exc


@pytest.mark.parametrize("exc", [RecursionError("deep"), MemoryError(), OverflowError("big"), KeyError("x"),
                                 UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")])
def test_any_exception_of_a_rule_is_that_rows_error_in_the_stage_and_in_the_stream(exc: BaseException) -> None:
    """The guard: a rule that raises anything costs its row, class output — never the run (the stream's stage
    and the scoring stage alike)."""
    scorer = MirScorer()
    scorer.rules["cmi_key"] = _Crashing(exc)
    rows = _rows("cmi_key", ["C major", "G major"])
    scored = score_requests([dict(r) for r in rows], scorers={"cmi": scorer})
    errors = _reconciled(rows, scored)
    assert len(errors) == 2 and all(e["error_class"] == "output" for e in errors)
    assert all(e["error"].startswith("cmi_key: ") and type(exc).__name__ in e["error"] for e in errors)
    from evalcore.scorers import mir
    from evalcore.pipeline.stages import JUDGED

    mir._SCORERS[json.dumps(None)] = scorer  # the stream's per-worker scorer
    try:
        table = pa.Table.from_pylist([{f.name: r.get(f.name) for f in JUDGED} for r in rows], schema=JUDGED)
        out = score_batch(table, ["cmi"]).to_pylist()
    finally:
        mir._SCORERS.clear()
    assert all("error" in json.loads(r["scores"]) for r in out)  # stored in the row, not raised out of the stage
    rescored = score_requests([{**r, "protocol_kind": "mir"} for r in out], scorers={"cmi": scorer})
    assert [e["error_class"] for e in _reconciled(rows, rescored)] == ["output", "output"]


def test_one_by_one_isolates_the_answer_that_raises() -> None:
    def judge(texts):
        if any(t == "bad" for t in texts):
            raise RecursionError("maximum recursion depth exceeded")
        return [len(t) for t in texts]

    got = one_by_one("j", judge, ["a", "bad", "ccc"])
    assert got[0] == 1 and got[2] == 3 and got[1].error_class == "output" and "RecursionError" in got[1]
    assert guarded("j", int, "12") == (12, None)
    calls = []

    def broken(texts):  # fails whatever the answer (a model that does not load): called twice, not once per answer
        calls.append(len(texts))
        raise OSError("weights not found")

    got = one_by_one("j", broken, ["a", "b", "c", "d"])  # a file missing: no answer causes it, none is retried
    assert calls == [4] and all(g.error_class is None and "weights not found" in g for g in got)

    def broken_for_all(texts):  # fails whatever the answer, with an exception an answer could cause
        calls.append(len(texts))
        raise ValueError("the judge's table is empty")

    calls.clear()
    got = one_by_one("j", broken_for_all, ["a", "b", "c", "d", "e"])
    assert calls == [5, 1, 1, 1] and all(g.error_class is None for g in got)
    got = one_by_one("j", judge, ["bad", "a", "bad", "ccc"])  # the bad answer first: the others still judged
    assert got[1] == 1 and got[3] == 3 and got[0].error_class == got[2].error_class == "output"


# the offline judges (the LLM judges call an endpoint: the same guard wraps them in the stage, not fuzzed here)
#: the options a judge reads (binary choice: two)
OPTIONS = {"binary_choice": ["guitar", "piano"]}
JUDGES = {"mcq_string": "mcq", "mcq_mmau": "mcq", "mcq_mmar": "mcq", "mcq_mmau_pro": "mcq", "mcq_muchomusic": "mcq",
          "mcq_rul": "mcq", "true_false": "mcq", "binary_choice": "mcq", "lexicon": "factual"}


@pytest.mark.parametrize("kind", sorted(JUDGES))
def test_a_thousand_hostile_answers_per_judge(kind: str) -> None:
    """Each offline judge, in the judge stage (:func:`evalcore.pipeline.stages.judge_batch`): every answer judged or
    an error row of the judge stage, never an exception out of the stage."""
    from evalcore.pipeline.stages import JUDGED, judge_batch

    family = JUDGES[kind]
    answers = [a.encode("utf-8", "replace").decode("utf-8") for a in corpus(family, N, seed=1)]  # Arrow: UTF-8
    rows = [{"request_id": f"r{i}", "protocol": "p", "task": "instrument", "question": "Which?", "text": a,
             "options": OPTIONS.get(kind, ["guitar", "piano", "drums", "vocals"]), "error": None, "n_chunks": 1}
            for i, a in enumerate(answers)]
    table = pa.Table.from_pylist([{f.name: r.get(f.name) for f in JUDGED} for r in rows], schema=JUDGED)
    params = {"embedder": "bag-of-words"} if kind == "mcq_mmau_pro" else {}  # NV-Embed's weights: not offline
    out = judge_batch(table, {"p": (kind, json.dumps(params))}).to_pylist()
    assert len(out) == len(rows)
    for r in out:
        assert r["error"] is None or (r["error_stage"] == "judge" and len(r["error"]) <= MAX_REASON_CHARS)
    assert sum(r["error"] is None for r in out) > len(out) // 2  # judged, not refused wholesale


def test_a_thousand_hostile_free_form_answers() -> None:
    from evalcore.scorers.freeform import FreeformScorer
    from evalcore.textmetrics.metric_config import FreeformMetrics

    answers = list(corpus("freeform", N, seed=2))
    rows = [{"request_id": f"f{i}", "dataset": "d", "item_id": f"i{i}", "protocol": "ff", "protocol_kind": "freeform",
             "model": "m", "condition": "correct", "variant": "default", "option_order": 0, "text": a,
             "reference": "a calm piano piece with soft strings", "error": None} for i, a in enumerate(answers)]
    scorer = FreeformScorer(metrics=FreeformMetrics(profile="mullama", names=["bleu", "rouge"]))
    scored = score_requests(rows, scorers={"ff": scorer})
    errors = [r for r in scored.rows if r.get("error") is not None]
    assert len(scored.per_item) + len(errors) == len(rows)
    assert all(e["error_stage"] == "score" and len(e["error"]) <= MAX_REASON_CHARS for e in errors)


# ---------------------------------------------------------------------------------------------- evalcore score cmi


def _released(path: Path, answers: list, task_answer: str = "C major", **extra) -> None:
    path.write_text("\n".join(json.dumps({"question": "Key?", "response": a, "correct_answer": task_answer,
                                          "audioid": f"{i}.wav", "other": "", **extra}) for i, a in enumerate(answers)))


def test_score_cmi_survives_the_answers_that_stopped_it(tmp_path: Path) -> None:
    """Finding 1 in ``evalcore score cmi``: a 400-digit word in a lyrics answer and a melody answer the parser
    cannot nest were a traceback and no output; now error rows, the others scored."""
    _released(tmp_path / "m_DSing.jsonl", ["1" * 400, "la la"], task_answer="la la")
    _released(tmp_path / "m_MedleyDB.jsonl", ["-" * 3000 + "1", "1+" * 3000 + "1", "[('10.0', 60)]"],
              task_answer="[('10.0', 60)]")
    res = runner.invoke(app, ["score", "cmi", str(tmp_path), "--out", str(tmp_path / "out"), "--resamples", "5"])
    assert res.exit_code == 0, res.output
    assert "rows: 5 in = 2 scored + 3 errored" in res.output
    errors = pq.read_table(tmp_path / "out" / "errors.parquet").to_pandas()
    assert set(errors["error_stage"]) == {"score"} and set(errors["error_class"]) == {"output"}


def test_score_cmi_checks_text_ids_and_duplicates_as_the_loader_does(tmp_path: Path) -> None:
    """Findings 4 and 5: a lone surrogate is an input error row (it crashed the command); a second record with the
    same item_id is an error row of its own, never merged into the first ("blues\\nblues", 11 records read as 10
    in); an item_id of 2 MB is an error row."""
    recs = [{"item_id": f"i{i}", "response": "blues", "correct_answer": "blues"} for i in range(10)]
    recs.append({"item_id": "i3", "response": "blues", "correct_answer": "blues"})  # the same id again
    recs.append({"item_id": "x" * 2_000_000, "response": "blues", "correct_answer": "blues"})
    recs.append({"item_id": "s", "response": "\ud800", "correct_answer": "blues"})
    path = tmp_path / "m_GTZAN.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs))  # json.dumps writes "\ud800" as its escape
    out = tmp_path / "out"
    res = runner.invoke(app, ["score", "cmi", str(path), "--out", str(out), "--resamples", "5"])
    assert res.exit_code == 0, res.output
    assert "rows: 13 in = 10 scored + 3 errored" in res.output
    per_item = pq.read_table(out / "per_item.parquet").to_pandas()
    assert not per_item["text"].str.contains("\n").any()
    errors = pq.read_table(out / "errors.parquet").to_pandas()
    assert set(errors["error_class"]) == {"input"} and errors["item_id"].str.len().max() <= 1024
    reasons = " | ".join(errors["error"])
    assert "appears again" in reasons and "not valid UTF-8" in reasons and "too long" in reasons


def test_score_cmi_says_each_skipped_file_and_classes_rule_stops_as_output(tmp_path: Path) -> None:
    """Finding 7: a file whose name names no task, beside files that do, has its terminal line; a rule's stop in
    the score stage is class output (it was model)."""
    _released(tmp_path / "m_GS_key.jsonl", ["C major"])
    _released(tmp_path / "m_Nonsense.jsonl", ["C major"])
    _released(tmp_path / "m_DSing.jsonl", ["²"], task_answer="la")  # a digit int() cannot read: the released stop
    res = runner.invoke(app, ["score", "cmi", str(tmp_path), "--out", str(tmp_path / "out"), "--resamples", "5"])
    assert res.exit_code == 0, res.output
    assert [ln for ln in res.stderr.splitlines() if "skipped" in ln and "m_Nonsense.jsonl" in ln]
    errors = pq.read_table(tmp_path / "out" / "errors.parquet").to_pandas()
    assert errors["error_class"].tolist() == ["output"] and errors["error_stage"].tolist() == ["score"]


# ------------------------------------------------------------------------------------------------ audio roots


def test_a_symlink_inside_the_root_that_leads_out_is_never_opened(tmp_path: Path) -> None:
    """Finding 6: the root check reads the resolved path (symlinks resolved), for every loader built on
    :func:`audio_uri` (CMI-Bench, MMAU, MMAR, MMAU-Pro) and the pattern loaders."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.wav").write_bytes(b"RIFF")
    (root / "clips").mkdir()
    (root / "clips" / "ok.wav").write_bytes(b"RIFF")
    os.symlink(outside, root / "link")  # a folder inside the root that leads out
    os.symlink(outside / "secret.wav", root / "clips" / "leak.wav")  # a file inside the root that leads out
    os.symlink(root / "clips" / "ok.wav", root / "clips" / "alias.wav")  # a link that stays inside
    assert isinstance(audio_uri(str(root), "link/secret.wav"), AudioOutside)
    assert isinstance(audio_uri(str(root), "./clips/leak.wav"), AudioOutside)
    assert isinstance(audio_uri(str(root), "../outside/secret.wav"), AudioOutside)
    assert audio_uri(str(root), "clips/alias.wav") == str(root / "clips" / "alias.wav")
    assert audio_uri(str(root), "clips/missing.wav") == str(root / "clips" / "missing.wav")  # a read error later
    from evalcore.datasets.records import outside_root  # the pattern loaders' check (HumMusQA, MuChoMusic)

    assert outside_root(str(root), "link/secret.wav") and outside_root(str(root), "clips/leak.wav")
    assert not outside_root(str(root), "clips/alias.wav") and not outside_root("s3://bucket/root", "link/x.wav")


def test_corpus_is_seeded() -> None:
    assert list(corpus("cmi_key", 50, seed=3)) == list(corpus("cmi_key", 50, seed=3))
    assert list(corpus("cmi_key", 50, seed=3)) != list(corpus("cmi_key", 50, seed=4))
    assert random.Random(0).random() == random.Random(0).random()


# ------------------------------------------------------------------------------------- browse: stores that fail


def _browse(root: str, endpoint: str, deadline: str) -> "subprocess.CompletedProcess[str]":
    import subprocess
    import sys

    env = {**os.environ, "AWS_ENDPOINT_URL_S3": endpoint, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y",
           "AWS_REGION": "us-east-1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([sys.executable, "-c", "from evalcore.cli import app; app()", "browse", root,
                           "--deadline", deadline], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.e2e  # the CLI in a subprocess (an abandoned S3 read ends it)
def test_browse_an_unreachable_or_silent_store_ends_in_one_line() -> None:
    """Finding 7: ``evalcore browse s3://…`` on an endpoint nobody listens on ended in a 45-line traceback; on one
    that accepts and never answers it hung. Now one line each, within the overall deadline."""
    import socket

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nobody listens there
    res = _browse("s3://bucket/run", f"http://127.0.0.1:{port}", "60")
    assert res.returncode in (1, 2) and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "Traceback" not in res.stderr
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections (the kernel's backlog), never answers
    try:
        res = _browse("s3://bucket/run", f"http://127.0.0.1:{silent.getsockname()[1]}", "3")
    finally:
        silent.close()
    assert res.returncode == 1 and "did not answer within 3 s" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
