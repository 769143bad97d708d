"""The suite fingerprint's config part: every field of the run config is declared the suite's or not, with why."""

from __future__ import annotations

import pathlib

from evalcore.runconfig.config import RunConfig, load_config
from evalcore.core.fingerprint import LATER, NOT_THE_SUITE, SUITE, suite_config

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_every_run_config_field_is_declared_in_or_out_of_the_suite() -> None:
    fields = set(RunConfig.model_fields)
    undeclared = sorted(fields - set(SUITE) - set(NOT_THE_SUITE))
    assert not undeclared, ("a run config field neither in evalcore/core/fingerprint.py's SUITE nor in its NOT_THE_SUITE "
                            f"(declare it in one, with why): {undeclared}")
    assert not set(SUITE) & set(NOT_THE_SUITE)
    assert set(SUITE) | set(NOT_THE_SUITE) == fields, "declared, but no longer a field of the run config"
    assert all(why.strip() for why in (*SUITE.values(), *NOT_THE_SUITE.values()))


def test_the_suite_s_part_of_a_written_config() -> None:
    written = load_config(REPO / "configs" / "small.yaml").model_dump(mode="json")  # as config.yaml holds it
    assert set(suite_config(written)) == set(SUITE) - LATER and suite_config(written)["datasets"] == written["datasets"]
    # a field added later joins only where a run sets it: the runs without it keep their fingerprints
    assert written["captions"] is None
    assert suite_config({**written, "captions": {"run": "r", "model": "m"}})["captions"] == {"run": "r", "model": "m"}
