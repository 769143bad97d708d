"""The protocol kinds (evalcore/kinds/): each names a scorer of its own kind, the config and the item checks read
the registry, and no module outside the package compares a protocol kind's name."""

from __future__ import annotations

import ast
import pathlib

import pytest

from evalcore.runconfig.config import ConfigError, parse_config
from evalcore.kinds.base import KINDS, config_mistake, kinds_where
from evalcore.kinds.scorer import Scorer
from evalcore.scoring.requests import scorer_class

REPO = pathlib.Path(__file__).resolve().parents[1]
#: modules where a kind's name is compared as data of another meaning, each with why
NAMED_AS_DATA = {
    # the derived factual formats are named after the kinds of the items they make (a dataset's ``formats`` param)
    "evalcore/datasets/factual_formats.py": "a format's name",
    "evalcore/datasets/fma.py": "a format's name",
}


@pytest.mark.parametrize("name", KINDS.names())
def test_every_kind_names_a_scorer_of_its_own(name: str) -> None:
    cls = scorer_class(name)
    assert issubclass(cls, Scorer) and cls.protocol == name


def _compared_names(path: pathlib.Path, names: set[str]) -> list[int]:
    """Lines of ``path`` comparing a string literal that is a kind's name (``x == "mcq"``, ``x in ("mcq", …)``)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        for side in (node.left, *node.comparators):
            consts = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            if any(isinstance(c, ast.Constant) and c.value in names for c in consts):
                lines.append(node.lineno)
    return lines


def test_no_kind_name_is_compared_outside_the_kinds_package() -> None:
    names = set(KINDS.names())
    found = {}
    for path in sorted((REPO / "evalcore").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("evalcore/kinds/") or rel in NAMED_AS_DATA:
            continue
        if lines := _compared_names(path, names):
            found[rel] = lines
    assert found == {}


def test_the_scan_finds_a_comparison(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "m.py"
    p.write_text('def f(p):\n    return p.kind == "mcq" or p.kind in ("factual", "x")\n')
    assert _compared_names(p, {"mcq", "factual"}) == [2, 2]


def test_a_field_of_another_kind_is_one_line_naming_it() -> None:
    assert config_mistake("factual", {"metrics": object()}) == "metrics applies to the freeform protocol only"
    assert config_mistake("freeform", {"metrics": object(), "icl_examples": [0, 0]}) is None
    assert "mcq protocol only" in config_mistake("freeform", {"icl_examples": [0, 2]})
    with pytest.raises(ConfigError, match="protocols.0.kind: unknown protocol kind 'essay'"):
        parse_config({"name": "x", "datasets": [{"name": "d", "kind": "synthetic"}],
                      "models": [{"name": "m", "kind": "null"}], "protocols": [{"name": "p", "kind": "essay"}]})


def test_capabilities_name_the_kinds_that_have_them() -> None:
    assert kinds_where("text_metrics") == ["freeform"]
    assert kinds_where("options", "shuffled") == ["mcq"]
    assert set(kinds_where("vocabulary")) == {"factual", "true_false", "binary_choice"}


def test_the_toy_kind_is_one_module_that_validates_and_configures() -> None:
    from evalcore.datasets.validate import validate_items
    from evalcore.kinds import _toy_exact as toy

    assert KINDS.get("toy_exact") is toy.ToyExact and scorer_class("toy_exact") is toy.ExactScorer
    good, bad = validate_items("d", [{"item_id": "a", "protocol": "toy_exact", "question": "q?", "audio_uri": "x.wav",
                                      "reference": "piano"},
                                     {"item_id": "b", "protocol": "toy_exact", "question": "q?", "audio_uri": "x.wav",
                                      "reference": " "}])
    assert [g["item_id"] for g in good] == ["a"] and "exact-match item needs a reference" in bad[0]["error"]
    cfg = parse_config({"name": "x", "datasets": [{"name": "d", "kind": "synthetic"}],
                        "models": [{"name": "m", "kind": "null"}], "protocols": [{"name": "toy_exact"}]})
    assert cfg.protocols[0].kind_spec is toy.ToyExact


@pytest.mark.ray
def test_the_toy_kind_runs_end_to_end(tmp_path: pathlib.Path, local_ray) -> None:
    """Items of the toy kind (evalcore/kinds/_toy_exact.py, imported here only: Ray's workers learn it from the
    config that carries the kind) go through a run: validated (a bad row is a load error with the kind's reason),
    asked under two conditions, scored by the kind's own scorer, summarised with its definition and reported."""
    import json

    import numpy as np
    import pyarrow.parquet as pq
    import soundfile as sf

    from evalcore.kinds import _toy_exact  # noqa: F401 - registers the toy kind
    from evalcore.pipeline.run import run

    wav = tmp_path / "tone.wav"
    sf.write(wav, (0.1 * np.sin(np.arange(16_000) / 10)).astype("float32"), 16_000)
    items = [{"item_id": f"i{i}", "protocol": "toy_exact", "question": f"Which instrument leads? ({i})",
              "reference": "piano" if i % 2 else "Guitar", "audio_uri": str(wav)} for i in range(6)]
    items.append({"item_id": "empty", "protocol": "toy_exact", "question": "?", "reference": "", "audio_uri": str(wav)})
    (tmp_path / "items.jsonl").write_text("\n".join(json.dumps(r) for r in items))
    cfg = parse_config({
        "name": "toy-kind", "datasets": [{"name": "d", "kind": "items_file", "params": {"path": str(tmp_path / "items.jsonl")}}],
        "models": [{"name": "fixed", "kind": "simulated_gpu_text", "params": {"seconds_per_batch": 0, "answer": " PIANO "},
                    "resources": {"num_cpus": 0.25}}],
        "protocols": [{"name": "toy_exact", "conditions": ["correct", "text_only"]}],
        "storage": {"root": str(tmp_path / "run")}, "stats": {"bootstrap_resamples": 100},
        "ray": {"progress_bars": False, "decode_num_cpus": 0.25}})
    result = run(cfg)
    root = tmp_path / "run" / "tables"
    per_item = pq.read_table(root / "per_item.parquet").to_pandas()
    assert len(per_item) == 12 and set(per_item["condition"]) == {"correct", "text_only"}
    assert (per_item["exact"] == (per_item["reference"] == "piano").astype(float)).all()
    summary = pq.read_table(root / "summary.parquet").to_pandas()
    rows = summary[(summary["metric"] == "exact_match") & (summary["kind"] == "value") & (summary["group"] == "all")]
    assert sorted(rows["value"].tolist()) == [0.5, 0.5]
    assert rows["definition"].str.contains("toy exact-match kind", regex=False).all()
    errors = pq.read_table(root / "errors.parquet").to_pandas()
    assert errors[errors["item_id"] == "empty"]["error"].str.contains("exact-match item needs").all()
    assert result.counts["items_in"] == 7 and result.counts["requests_scored"] == 12
    assert "## toy_exact · d" in result.report and "exact_match" in result.report


BUILT_IN = [n for n in KINDS.names() if not KINDS.get(n).__module__.rsplit(".", 1)[-1].startswith("_")]


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_kinds_listening_figures_are_figures_its_scorer_declares(name: str) -> None:
    """The listening verdict reads the first of a kind's listening figures a protocol has: each is one its scorer
    declares (a mir protocol: one of CMI-Bench's rules'), in the order of the verdict's list for unknown kinds."""
    from evalcore.mir_rules import tagging
    from evalcore.mir_rules.rules import RULES
    from evalcore.reports.verdict import PRIMARY

    kind = KINDS.get(name)
    scorer = scorer_class(name)()
    declared = {a.name for a in (*scorer.aggregates, *scorer.with_errors)}
    if kind.released_rules:
        declared |= {a.name for r in RULES.names() for a in RULES.build(r).aggregates} | set(tagging.FIGURES)
    assert kind.listening and set(kind.listening) <= declared
    assert list(kind.listening) == [m for m in PRIMARY if m in kind.listening]
