"""``evalcore validate`` checks that the audio file each items-file row names exists: missing files are a mistake
(exit 2, one line naming the dataset's ``path``), the first five listed with their rows, how many rows were read
(reading stops at the fifth) and what a relative ``audio_uri`` is relative to; ``--no-check-paths`` skips the check.
A run is not refused: it makes a missing file that row's error (docs/bad_inputs.md)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.core.errors import ExitCode

runner = CliRunner()


def _config(tmp_path: Path, n_rows: int, present: set[int]) -> Path:
    clips = tmp_path / "mydata" / "clips"
    clips.mkdir(parents=True)
    rows = [{"item_id": f"q{i}", "protocol": "mcq", "audio_uri": f"clips/{i}.wav", "question": "Fast or slow?",
             "options": ["slow", "fast"], "correct_option": 0} for i in range(n_rows)]
    rows.append({"item_id": "again", **{k: v for k, v in rows[1].items() if k != "item_id"}})  # a file named twice
    (tmp_path / "mydata" / "items.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    for i in present:
        (clips / f"{i}.wav").write_bytes(b"RIFF")  # existence is checked, not content
    cfg = {"name": "mine", "datasets": [{"name": "mine", "kind": "items_file", "params": {"path": "mydata/items.jsonl"}}],
           "models": [{"name": "text-prior", "kind": "text_prior"}], "protocols": [{"name": "mcq"}]}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _validate(path: Path, *args: str):
    return runner.invoke(app, ["validate", str(path), *args])


def test_missing_audio_files_are_named_and_reading_stops_at_five(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the items path is relative to the working directory, as in the README
    path = _config(tmp_path, 12, present={0, 3})
    res = _validate(path)
    assert res.exit_code == ExitCode.USAGE, res.output
    (line,) = [ln.strip() for ln in res.output.splitlines() if ln.startswith("  ")]
    clips = tmp_path / "mydata" / "clips"
    assert line.startswith("datasets.0.params.path: 5 audio file(s) named by its rows do not exist (stopped at the "
                           f"first 5 missing, after 7 rows; a relative audio_uri is relative to {tmp_path / 'mydata'}):")
    assert line.endswith("; ".join(f"row {i + 1} ('q{i}'): {clips / f'{i}.wav'}" for i in (1, 2, 4, 5, 6)))
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_one_missing_file_among_a_few_and_the_checks_switch(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = _config(tmp_path, 3, present={0, 2})
    res = _validate(path)
    assert res.exit_code == ExitCode.USAGE and "1 audio file(s) named by its rows do not exist (4 rows read; " \
        in res.output and f"row 2 ('q1'): {tmp_path / 'mydata' / 'clips' / '1.wav'}" in res.output, res.output
    assert "'again'" not in res.output  # a file named by two rows is checked (and named) once
    skipped = _validate(path, "--no-check-paths")
    assert skipped.exit_code == ExitCode.OK and skipped.output.startswith("ok: mine "), skipped.output
    (tmp_path / "mydata" / "clips" / "1.wav").write_bytes(b"RIFF")
    ok = _validate(path)
    assert ok.exit_code == ExitCode.OK and ok.output.startswith("ok: mine "), ok.output
    quiet = _validate(path, "--quiet")
    assert quiet.exit_code == ExitCode.OK and quiet.output == "", quiet.output  # --quiet: the exit code says it
