"""Bad records and bad files in the released benchmark layouts, for every released-benchmark loader: the same
guards as the items file (bounded nesting, digits, decoding), a file that cannot be read at all refused by
``evalcore validate`` naming the field, every record ending as an item or an error row (duplicates and records
without the field their subset is chosen by counted), symbols kept as text, an audio path that leaves its root an
error row. Unit-level (no Ray): each case is a small file built here around two good records, read by the loader
and validated as a run validates items. ``docs/bad_inputs.md`` ("Released benchmark files") states the same table:
the test checks the doc against it."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evalcore.datasets  # noqa: F401  (registers the datasets)
from evalcore.datasets.base import DatasetContext
from evalcore.datasets.validate import validate_items
from evalcore.datasets.base import DATASETS

REPO = Path(__file__).resolve().parents[1]
DEEP = 30_000
ESCAPE = "../../../../etc/passwd"
SYMBOLS = ["♯", "♭", "🎸", "A major"]


def _raw_deep() -> bytes:
    return b"[" * DEEP + b"]" * DEEP


def _digits() -> bytes:
    return b"1" * 4301


# ----------------------------------------------------------------------------- the loaders' released layouts


def _mmau(i: int, **over: Any) -> dict:
    return {"id": f"q{i}", "audio_id": f"./test-mini-audios/q{i}.wav", "question": "Which instrument leads?",
            "choices": ["Piano", "Guitar", "Violin", "Drums"], "answer": "Guitar", "dataset": "src", "task": "music",
            "split": "test-mini", "category": "Information Extraction", "sub-category": "Instrumentation",
            "difficulty": "easy", **over}


def _mmar(i: int, **over: Any) -> dict:
    return {"id": f"q{i}", "audio_path": f"./audio/q{i}.wav", "question": "Which instrument leads?",
            "choices": ["Piano", "Guitar", "Violin"], "answer": "Guitar", "modality": "music", "category": "Perception",
            "sub-category": "Instrument", **over}


def _pro(i: int, **over: Any) -> dict:
    return {"id": f"q{i}", "audio_path": [f"data/q{i}.wav"], "question": "Which instrument leads?",
            "answer": "Guitar", "choices": ["Piano", "Guitar", "Violin"], "category": "music",
            "perceptual_skills": ["timbre"], "reasoning_skills": [], **over}


def _rul(i: int, **over: Any) -> dict:
    return {"question": "Which instrument leads?", "caption": "a caption", "correct_answer": "Guitar",
            "distractors": ["Piano", "Violin", "Drums", "Flute"], "PI": 0.5, **over}


def _musicqa(i: int, **over: Any) -> dict:
    return {"audio_name": f"{i:06d}.wav", "conversation": [{"from": "human", "value": "What is the tempo?"},
                                                           {"from": "gpt", "value": "It is slow."}], **over}


def _mucho(i: int, **over: Any) -> dict:
    return {"question": "Which instrument leads?", "correct_answer": "Guitar", "distractor_1_answer": "Piano",
            "distractor_2_answer": "Violin", "distractor_3_answer": "Drums", "dataset": "sdd",
            "dataset_identifier": f"{1000 + i}.json", "genre": "rock", "music_knowledge": "['Instrumentation']",
            "music_reasoning": "[]", **over}


def _hum(i: int, **over: Any) -> dict:
    return {"identifier": f"h{i}", "question": "Which instrument leads?", "answer": "Guitar", "distractor_1": "Piano",
            "distractor_2": "Violin", "distractor_3": "Drums", "main_category": "Timbre",
            "secondary_categories": "['Harmony']", "difficulty": "Low", "excerpt_start_time": "0",
            "excerpt_end_time": "10", "jamendo_id": str(100 + i), **over}


def _musicnet(i: int, **over: Any) -> dict:
    return {"id": str(2000 + i), "composer": "Bach", "composition": "Suite", "movement": "1", "ensemble": "Solo Cello",
            "source": "s", "transcriber": "t", "catalog_name": "BWV 1007", "seconds": "100", **over}


def _fma(i: int, **over: Any) -> dict:
    return {"track_id": str(2 + i), "subset": "small", "split": "test", "genre_top": "Rock", "genres": "[12]", **over}


def _cmi(i: int, **over: Any) -> dict:
    return {"instruction": "Which genre is this?", "input": "", "output": "blues", "uuid": "", "audio_start": 0.0,
            "audio_end": -1, "audio_path": [f"data/GTZAN/audio/blues.{i:05d}.wav"], "split": ["test"],
            "task_type": "major", "source": "GTZAN", "other": {}, **over}


def _json(records: list) -> bytes:
    return json.dumps(records, ensure_ascii=False).encode()


def _jsonl(records: list) -> bytes:
    return b"\n".join(r if isinstance(r, bytes) else json.dumps(r, ensure_ascii=False).encode() for r in records)


def _list_with(records: list) -> bytes:
    """A JSON list whose elements may be raw bytes (a record no JSON writer would write)."""
    return b"[" + b",".join(r if isinstance(r, bytes) else json.dumps(r, ensure_ascii=False).encode()
                            for r in records) + b"]"


def _object_with(pairs: list[tuple[str, Any]]) -> bytes:
    """A JSON object whose members may repeat a key or hold raw bytes."""
    return b"{" + b",".join(json.dumps(k).encode() + b":" + (v if isinstance(v, bytes) else json.dumps(v).encode())
                            for k, v in pairs) + b"}"


def _csv(rows: list[dict]) -> bytes:
    return pd.DataFrame(rows).to_csv(index=False).encode()


def _parquet(rows: list[dict]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def _fma_tracks(rows: list[dict]) -> bytes:
    head = ("," + ",".join(["set", "set", "track", "track"]) + "\n" + ",subset,split,genre_top,genres\n"
            + "track_id,,,,\n")
    return (head + "".join(f"{r['track_id']},{r['subset']},{r['split']},{r['genre_top']},\"{r['genres']}\"\n"
                           for r in rows)).encode()


GENRES = b"genre_id,#tracks,parent,title,top_level\n12,10,0,Rock,12\n"


@dataclass
class Loader:
    kind: str
    file: str  # the released file's name (under the case's folder)
    record: Callable[..., dict]
    write: Callable[[list], bytes]
    params: Callable[[Path], dict]
    raw_list: Callable[[list], bytes] | None = None  # a file whose records may be raw bytes
    path_param: str | None = "path"  # the param naming the file (None: the params name its folder)


LOADERS = {
    "mmau": Loader("mmau", "mmau-test-mini.json", _mmau, _json, lambda d: {"audio_root": str(d)}, _list_with),
    "mmar": Loader("mmar", "MMAR-meta.jsonl", _mmar, _jsonl, lambda d: {"audio_root": str(d)}, _jsonl),
    "mmau_pro": Loader("mmau_pro", "test.parquet", _pro, _parquet, lambda d: {"audio_root": str(d)}),
    "rul_muchomusic": Loader("rul_muchomusic", "RUL-MuchoMusic.json", _rul,
                             lambda recs: _object_with([(str(1740 + i), r) for i, r in enumerate(recs)]),
                             lambda d: {"audio_dir": str(d)}, lambda recs: _object_with(
                                 [(str(1740 + i), r) for i, r in enumerate(recs)])),
    "musicqa": Loader("musicqa", "EvalMusicQA.json", _musicqa, _json, lambda d: {"audio_root": str(d)}, _list_with),
    "muchomusic": Loader("muchomusic", "muchomusic.csv", _mucho, _csv,
                         lambda d: {"audio_root": str(d), "audio_pattern": "{dataset}/{audio_id}.mp3"}),
    "hummusqa": Loader("hummusqa", "hummusqa.csv", _hum, _csv, lambda d: {"audio_root": str(d)}),
    "musicnet": Loader("musicnet", "musicnet_metadata.csv", _musicnet, _csv,
                       lambda d: {"audio_root": str(d), "task": "composer"}),
    "fma": Loader("fma", "tracks.csv", _fma, _fma_tracks, lambda d: {"genres": str(d / "genres.csv"),
                                                                     "audio_root": str(d)}, path_param="tracks"),
    "cmi_bench": Loader("cmi_bench", "data/GTZAN/CMI_GTZAN.jsonl", _cmi, _jsonl,
                        lambda d: {"root": str(d), "tasks": ["GTZAN"]}, _jsonl, path_param=None),
}
LOADERS["musicnet"].path_param = "metadata"


# ----------------------------------------------------------------------------- the cases


def _case_file(loader: Loader, case: str) -> bytes:
    """The released file of ``case``: two good records around the bad one (or a bad file)."""
    L, good = loader, [loader.record(0), loader.record(1)]
    if case == "empty":
        return b""
    if case == "binary":
        return bytes(range(256)) * 8
    if case == "truncated":
        whole = L.write(good + [L.record(2)])
        return whole[: len(whole) // 2]
    if case in ("deep", "4301-digits", "latin1") and L.raw_list is not None:
        bad = {"deep": b'{"id": "bad", "question": ' + _raw_deep() + b"}",
               "4301-digits": b'{"id": "bad", "question": "Q", "n": ' + _digits() + b"}",
               "latin1": json.dumps(L.record(9)).encode().replace(b"Wh", b"Wh\xe9", 1)}[case]
        return L.raw_list([good[0], bad, good[1]])
    if case == "latin1":  # a table: one row's text in Latin-1
        return _latin1_table(L, good)
    if case == "duplicate":
        if L.kind == "rul_muchomusic":
            return _object_with([("1740", good[0]), ("1741", good[1]), ("1740", L.record(2))])
        key = {"mmau": "id", "mmar": "id", "mmau_pro": "id", "hummusqa": "identifier", "musicnet": "id"}[L.kind]
        return L.write(good + [L.record(2, **{key: good[0][key]})])
    if case == "null-subset":
        field = {"mmau": "task", "mmar": "modality", "mmau_pro": "category"}[L.kind]
        return L.write(good + [L.record(2, **{field: None})])
    if case == "no-subset-column":
        return L.write([{k: v for k, v in r.items() if k != "category"} for r in good])
    if case == "symbols":
        answer = "♯"
        return L.write(good + [L.record(2, choices=SYMBOLS, answer=answer)])
    if case == "escape":
        field = {"mmau": ("audio_id", ESCAPE), "mmar": ("audio_path", ESCAPE), "mmau_pro": ("audio_path", [ESCAPE]),
                 "cmi_bench": ("audio_path", [ESCAPE]),
                 "musicqa": ("audio_name", ESCAPE), "muchomusic": ("dataset_identifier", ESCAPE + ".json"),
                 "hummusqa": ("jamendo_id", ESCAPE), "musicnet": ("id", ESCAPE)}.get(L.kind)
        if L.kind == "rul_muchomusic":
            return _object_with([("1740", good[0]), (ESCAPE, L.record(2)), ("1741", good[1])])
        return L.write(good + [L.record(2, **{field[0]: field[1]})])
    if case == "huge-pi":
        return _object_with([("1740", good[0]), ("1741", json.dumps(L.record(2, PI="X")).encode().replace(
            b'"X"', b"1" + b"0" * 400)), ("1742", good[1])])
    if case == "misfit-line":
        text = L.write(good).decode()
        return (text + "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q\n").encode()
    if case == "deep-cell":
        field = {"muchomusic": "music_knowledge", "hummusqa": "secondary_categories"}[L.kind]
        return L.write(good + [L.record(2, **{field: "[" * DEEP + "]" * DEEP})])
    if case == "4301-digit-cell":
        field = {"hummusqa": "excerpt_start_time", "musicnet": "seconds", "fma": "track_id"}[L.kind]
        return L.write(good + [L.record(2, **{field: "1" * 4301})])
    raise AssertionError(case)


def _latin1_table(L: Loader, good: list[dict]) -> bytes:
    bad = L.record(2)
    key = {"fma": "genre_top", "musicnet": "composer"}.get(L.kind, "question")
    bad[key] = "MARKER"
    return L.write(good + [bad]).replace(b"MARKER", "Gr\u00e9try".encode("latin-1"))


def outcome(loader: Loader, case: str, tmp: Path) -> str:
    """What the loader and validation make of ``case``: ``item``, ``load: <error>`` or ``validate: <error>``."""
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / loader.file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_case_file(loader, case))
    (tmp / "genres.csv").write_bytes(GENRES)
    params = {**({loader.path_param: str(path)} if loader.path_param else {}), **loader.params(tmp)}
    cls = DATASETS.get(loader.kind)
    from evalcore.core.params import path_problems

    found = path_problems(cls, params)  # what `evalcore validate` checks of the dataset's files
    if found:
        return "validate: " + "; ".join(f"{f}: {m}" if f else m for f, m in found)
    rows = list(cls(**params).items(DatasetContext(name="d", run_root=str(tmp / "run"), seed=0)))
    good, bad = validate_items("d", rows)
    assert len(good) + len(bad) == len(rows)  # every record an item or an error row
    if bad:
        return "load: " + " | ".join(b["error"] for b in bad)
    return "item"


def _doc_rows() -> list[tuple[str, str, str, str]]:
    doc = (REPO / "docs" / "bad_inputs.md").read_text(encoding="utf-8")
    part = (doc.split("## Released benchmark files", 1)[1:] or [""])[0].split("\n## ", 1)[0]
    return [tuple(c.strip().strip("`") for c in line.strip().strip("|").split("|"))  # type: ignore[misc]
            for line in part.splitlines() if re.match(r"^\| [a-z_]+ \| `", line)]


ROWS = _doc_rows()


def test_the_doc_has_every_loader_and_the_guards_for_each() -> None:
    by = {}
    for loader, case, _, _ in ROWS:
        by.setdefault(loader, set()).add(case)
    assert set(by) == set(LOADERS) == {k for k in DATASETS.names() if k not in ("items_file", "synthetic")}
    for loader, cases in by.items():
        assert {"empty", "binary", "truncated", "latin1"} <= cases, loader


@pytest.mark.parametrize("loader, case, what, want", ROWS, ids=[f"{r[0]}-{r[1]}" for r in ROWS])
def test_each_case_ends_as_the_doc_says(tmp_path, loader: str, case: str, what: str, want: str) -> None:
    got = outcome(LOADERS[loader], case, tmp_path)
    if want == "item":
        assert got == "item", got
    else:
        head, _, text = want.partition(": ")
        assert got.startswith(head + ": ") and text in got, got


def test_a_file_that_cannot_be_read_is_a_config_error_at_validate_and_run(tmp_path) -> None:
    """A truncated released file passed ``validate`` and failed the run with exit 1 and "finish it with --resume",
    which failed the same way; now both exit 2 with one line naming the field, before anything runs."""
    import yaml
    from typer.testing import CliRunner

    from evalcore.cli import app

    whole = _json([_mmau(0), _mmau(1), _mmau(2)])
    (tmp_path / "mmau.json").write_bytes(whole[: len(whole) // 2])
    cfg = {"name": "cut", "datasets": [{"name": "m", "kind": "mmau", "params": {"path": str(tmp_path / "mmau.json")}}],
           "models": [{"name": "prior", "kind": "text_prior"}], "protocols": [{"name": "mmau", "kind": "mcq"}],
           "storage": {"root": str(tmp_path / "run")}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    for command in (["validate"], ["run", "--no-ping"]):
        res = CliRunner().invoke(app, [*command, str(tmp_path / "c.yaml")])
        assert res.exit_code == 2, res.output
        assert "datasets.0.params.path: " in res.output and "is cut short" in res.output and "--resume" not in res.output
    assert not (tmp_path / "run").exists()  # refused before anything was written
