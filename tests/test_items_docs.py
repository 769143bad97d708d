"""docs/items.md, `evalcore schema` and the row checks the run applies say the same thing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.datasets.validate import FIELDS, validate_items
from evalcore.core.errors import ExitCode
from evalcore.cli.input_schemas import schema_names

DOC = (Path(__file__).resolve().parents[1] / "docs" / "items.md").read_text()
EXAMPLES = [json.loads(line) for block in re.findall(r"```jsonl\n(.*?)```", DOC, re.S)
            for line in block.splitlines() if line.strip()]
runner = CliRunner()


def _schema(name: str) -> dict:
    res = runner.invoke(app, ["schema", name])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_every_field_is_documented_and_every_protocol_has_an_example() -> None:
    for field in FIELDS:
        assert f"`{field}`" in DOC, field
    assert {e["protocol"] for e in EXAMPLES} == {"freeform", "factual", "mcq", "true_false", "binary_choice"}


def test_the_examples_pass_the_schema_and_the_runs_own_checks() -> None:
    schema = _schema("items")
    for row in EXAMPLES:
        jsonschema.validate(row, schema)
    good, bad = validate_items("docs", EXAMPLES)
    assert bad == [] and len(good) == len(EXAMPLES)


@pytest.mark.parametrize("mutate,says", [
    (lambda r: r.pop("options"), "options"),
    (lambda r: r.update(labell=["x"]), "did you mean 'labels'?"),
    (lambda r: r.update(protocol="multiple_choice"), "protocol"),
    (lambda r: r.pop("correct_option"), "correct_option"),
])
def test_a_bad_row_fails_the_schema_and_the_checks(mutate, says) -> None:
    row = dict(next(e for e in EXAMPLES if e["protocol"] == "mcq"))
    mutate(row)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(row, _schema("items"))
    good, bad = validate_items("docs", [row])
    assert good == [] and says in bad[0]["error"]


def test_correct_index_is_another_name_for_correct_option() -> None:
    row = dict(next(e for e in EXAMPLES if e["protocol"] == "mcq"))
    row["correct_index"] = row.pop("correct_option")
    jsonschema.validate(row, _schema("items"))
    good, bad = validate_items("docs", [row])
    assert bad == [] and good[0]["correct_option"] == 0
    good, bad = validate_items("docs", [{**row, "correct_option": 1}])
    assert good == [] and "disagree" in bad[0]["error"]


def test_score_mcq_takes_correct_option_too(tmp_path: Path) -> None:
    rows = [{"question_id": 1, "order_id": o, "options": ["a", "b"], "correct_option": o, "response": ["(A)", "(B)"][o]}
            for o in (0, 1)]
    jsonschema.validate(rows[0], _schema("mcq"))
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = runner.invoke(app, ["score", "mcq", str(path), "--out", str(tmp_path / "out")])
    assert res.exit_code == ExitCode.OK, res.output
    per_item = pd.read_parquet(tmp_path / "out" / "per_item.parquet")
    assert per_item["correct"].tolist() == [True, True]


def test_every_schema_is_printed_and_an_unknown_one_exits_2() -> None:
    for name in schema_names():
        assert _schema(name)["type"] == "object"
    assert runner.invoke(app, ["schema", "itmes"]).exit_code == ExitCode.USAGE
