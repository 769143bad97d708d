"""MMAR: the loader reads the released metadata unrenamed (tests/fixtures/mmar: ``MMAR-meta.jsonl`` in the
released fields and layout, and the earlier ``MMAR-meta.json`` list form), and the ``mcq_mmar`` judge follows
github.com/ddlBoJack/MMAR ``code/evaluation.py``, whose ``string_match`` is MMAU's rule (held case by case
against the transcription of the published function in tests/test_mmau.py).

On the fixture's music records, with seeded responses of every shape, the default figure (``correct``, as the
scoring stage computes it from the judge's ``credited`` options, and as ``evalcore score mcq --released mmar``
writes it) equals the released function's verdict item for item — run on the released record's own ``choices``,
its blank choice included — and the strict figure (``correct_strict``) equals the verdict before the published
one was added (the one option named is the answer)."""

from __future__ import annotations

import json
import pathlib
import random

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from evalcore.datasets.base import DatasetContext
from evalcore.datasets.mmar import MMAR
from evalcore.datasets.validate import validate_items
from evalcore.judges.mmar import McqMmarJudge
from evalcore.judges.mmau import parse_mmau
from evalcore.scoring.requests import merge_chunks, score_requests
from test_mmau import published_verdict

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "mmar"

SCALES = ["Major scale", "Minor scale", "Whole-tone scale", "Pentatonic scale"]
LOUDNESS = ["From quiet to loud", "From loud to quiet", "Remains unchanged"]
YES_NO = ["Yes", "No"]
GAME = ["Word guessing game", "Number guessing game", "Do not do challenge"]  # the released "" choice dropped

# (response, choices, answer, evalcore's parsed index, the published verdict) — MMAR's shapes: 2 to 4 choices,
# shared words, yes/no questions, reasoning text before the answer
CASES = [
    ("Pentatonic scale", SCALES, "Pentatonic scale", 3, True),
    ("It is pentatonic.", SCALES, "Pentatonic scale", -1, False),  # "scale" missing
    ("The melody uses a pentatonic scale", SCALES, "Pentatonic scale", 3, True),
    ("Not a major scale but a pentatonic scale", SCALES, "Pentatonic scale", -1, False),  # "major" spoils it
    ("From loud to quiet", LOUDNESS, "From quiet to loud", -1, True),  # one word set: credited by the scorer
    ("Remains unchanged", LOUDNESS, "From quiet to loud", 2, False),
    ("Yes", YES_NO, "Yes", 0, True),
    ("Yes, there is a drum solo.", YES_NO, "Yes", 0, True),
    ("No.", YES_NO, "Yes", 1, False),
    ("B", YES_NO, "No", -1, False),
    ("Word guessing game", GAME, "Word guessing game", 0, True),
    ("A guessing game", GAME, "Word guessing game", -1, False),
    ("I cannot hear the audio.", GAME, "Word guessing game", -1, False),
]


@pytest.mark.parametrize(("response", "choices", "answer", "index", "verdict"), CASES,
                         ids=[f"{i}:{c[0][:30]}" for i, c in enumerate(CASES)])
def test_judge_follows_the_published_rule(response, choices, answer, index, verdict) -> None:
    assert published_verdict(answer, response, choices) is verdict
    (got,) = McqMmarJudge().judge([response], [choices])
    assert got["parsed_index"] == index


def _items(tmp_path, path, **params):
    ds = MMAR(path=str(path), **params)
    return validate_items("mmar", ds.items(DatasetContext("mmar", str(tmp_path), 0)))


def test_loader_reads_the_music_related_modalities(tmp_path) -> None:
    released = [json.loads(line) for line in (FIXTURES / "MMAR-meta.jsonl").read_text().splitlines()]
    assert {"id", "audio_path", "question", "choices", "answer", "modality", "category", "sub-category", "language",
            "source", "url", "timestamp", "thinking", "cue", "rubric"} == set(released[0])
    good, bad = _items(tmp_path, FIXTURES / "MMAR-meta.jsonl")
    assert bad == []
    assert [g["item_id"] for g in good] == [r["id"] for r in released if "music" in r["modality"]]
    assert [g["task"] for g in good] == ["music", "music", "mix-music-speech", "mix-sound-music"]
    first = good[0]
    assert first["options"] == released[0]["choices"] and first["correct_option"] == 3
    assert pathlib.Path(first["audio_uri"]) == FIXTURES / "audio" / f"{released[0]['id']}.wav"
    assert pathlib.Path(first["audio_uri"]).is_file()
    assert first["category"] == "Perception Layer"
    assert json.loads(first["metadata"])["secondary_categories"] == ["Music Theory"]
    game = good[2]  # released with an empty "" fourth choice: left out, and counted
    assert game["options"] == GAME and json.loads(game["metadata"])["dropped_empty_choices"] == 1
    assert len(good[3]["options"]) == 2


def test_loader_reads_the_earlier_json_list_and_flags_bad_records(tmp_path) -> None:
    released = [json.loads(line) for line in (FIXTURES / "MMAR-meta.jsonl").read_text().splitlines()]
    released[1] = {**released[1], "answer": "From near to far"}  # not one of its choices
    path = tmp_path / "MMAR-meta.json"
    path.write_text(json.dumps([*released, "not a record"]))
    good, bad = _items(tmp_path, path, modalities=["music", "sound"], audio_root=str(FIXTURES))
    assert [g["task"] for g in good] == ["music", "sound"]
    assert len(bad) == 2
    assert "is not one of its choices" in bad[0]["error"] and "not an object" in bad[1]["error"]


def test_an_unreadable_jsonl_line_is_an_error_row(tmp_path) -> None:
    lines = (FIXTURES / "MMAR-meta.jsonl").read_text().splitlines()
    path = tmp_path / "MMAR-meta.jsonl"
    path.write_text("\n".join([lines[0], "{broken", lines[1]]) + "\n")
    good, bad = _items(tmp_path, path, audio_root=str(FIXTURES))
    assert len(good) == 2 and len(bad) == 1 and "line 2 of" in bad[0]["error"] and "invalid JSON" in bad[0]["error"]


# --------------------------------------------------------------------------- the published verdict by default

FILLERS = ["the", "answer", "is", "it", "sounds", "like", "not", "but", "maybe", "clearly", "I", "think", "audio"]


def responses(choices: list[str], rng: random.Random) -> list[str]:
    """Seeded responses of the shapes models give: each choice (bare, in a sentence, with its letter, its words
    reordered, shouted), hedges over two choices, negations, letters alone, refusals, nothing, and bags of the
    choices' words with fillers."""
    real = [c for c in choices if c]
    out = ["", "...", "I cannot hear the audio.", "None of the above.", "A", "(B)", "B or C"]
    for k, c in enumerate(real):
        letter = "ABCDEF"[k]
        words = c.split()
        out += [c, f"The answer is {c.lower()}.", f"({letter}) {c}", " ".join(reversed(words)), c.upper() + "!",
                f"not {c}", f"It is definitely {c}, because of the rhythm."]
        for d in real:
            if d != c:
                out += [f"{c} or {d}", f"Not {d}, but {c}", f"{c}, not {d}"]
    vocab = sorted({w.strip(",.").lower() for c in real for w in c.split()})
    for _ in range(40):
        out.append(" ".join(rng.choice(vocab + FILLERS) for _ in range(rng.randint(1, 7))))
    return out


def judged_music_records(tmp_path) -> list[dict]:
    """Each music record of the fixture (its loaded item and its released record) × 3 seeded option orders × the
    seeded responses, judged by ``mcq_mmar`` and scored by the scoring stage: one row each with the released
    function's verdict and the verdict before the published one was added."""
    released = {r["id"]: r for r in map(json.loads, (FIXTURES / "MMAR-meta.jsonl").read_text().splitlines())}
    good, bad = _items(tmp_path, FIXTURES / "MMAR-meta.jsonl")
    assert bad == [] and len(good) == 4
    rng, judge, rows = random.Random(0), McqMmarJudge(), []
    for item in good:
        rec = released[item["item_id"]]
        answer = item["options"][item["correct_option"]]
        assert answer == rec["answer"]
        texts = responses(rec["choices"], rng)
        for order in range(3):
            shown = list(item["options"])
            random.Random(f"{item['item_id']}:{order}").shuffle(shown)
            for k, (text, got) in enumerate(zip(texts, judge.judge(texts, [shown] * len(texts)))):
                rows.append({"request_id": f"{item['item_id']}:{order}:{k}", "protocol": "mmar", "protocol_kind": "mcq",
                             "item_id": f"{item['item_id']}:{k}", "error": None, "options": shown,
                             "correct_index": shown.index(answer), "text": text, "judge": f"mcq_mmar@{judge.version}",
                             **got, "released": published_verdict(rec["answer"], text, rec["choices"]),
                             "before": float(got["parsed_index"] >= 0 and got["parsed_index"] == shown.index(answer))})
                assert got["parsed_index"] == parse_mmau(text, shown)
    per_item = score_requests(merge_chunks([dict(r) for r in rows])).per_item.set_index("request_id")
    for r in rows:
        r["correct"], r["correct_strict"] = per_item.loc[r["request_id"], ["correct", "correct_strict"]]
    return rows


def test_default_is_the_released_verdict_and_strict_is_the_old_one_on_the_music_records(tmp_path) -> None:
    rows = judged_music_records(tmp_path)
    assert len(rows) > 1000
    assert [r["request_id"] for r in rows if r["correct"] != float(r["released"])] == []  # item for item
    assert [r["request_id"] for r in rows if r["correct_strict"] != r["before"]] == []
    differ = [r for r in rows if r["correct"] != r["correct_strict"]]
    # they differ only by the same-words rule: "From quiet to loud" / "From loud to quiet" (record B), credited both
    assert differ and {r["item_id"].split(":")[0] for r in differ} == {"BBBBBBBBBBB_00-01-00_00-01-30"}
    assert all(len(r["credited"]) == 2 and r["parsed_index"] == -1 and r["correct"] == 1.0 for r in differ)


def test_score_mcq_released_mmar_gives_the_released_verdicts(tmp_path) -> None:
    """``evalcore score mcq --released mmar --parser mmar`` on a released file holding the seeded responses:
    ``correct`` is the released function's verdict on every record, ``correct_strict`` the one option named."""
    from evalcore.cli import app

    released = [json.loads(x) for x in (FIXTURES / "MMAR-meta.jsonl").read_text().splitlines()]
    rng, records = random.Random(1), []
    for rec in released:
        if "music" in rec["modality"]:
            records += [{**rec, "id": f"{rec['id']}#{k}", "answer_prediction": text}
                        for k, text in enumerate(responses(rec["choices"], rng))]
    path = tmp_path / "MMAR-meta.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = CliRunner().invoke(app, ["score", "mcq", str(path), "--released", "mmar", "--parser", "mmar", "--out",
                                   str(tmp_path / "out"), "--resamples", "10", "--quiet"])
    assert res.exit_code == 0, res.output
    got = pq.read_table(tmp_path / "out" / "per_item.parquet").to_pandas().set_index("question_id")
    want = {r["id"]: published_verdict(r["answer"], r["answer_prediction"], r["choices"]) for r in records}
    assert got["correct"].astype(bool).to_dict() == want
    strict = {r["id"]: parse_mmau(r["answer_prediction"], [c for c in r["choices"] if c])
              == [c for c in r["choices"] if c].index(r["answer"]) for r in records}
    assert got["correct_strict"].astype(bool).to_dict() == strict
    assert (got["correct"] != got["correct_strict"]).sum() > 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "accuracy_mean_strict" in report and "differ" in report
