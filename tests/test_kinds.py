"""The protocol kinds (evalcore/kinds/): each names a scorer of its own kind, the config and the item checks read
the registry, and no module outside the package compares a protocol kind's name."""

from __future__ import annotations

import ast
import pathlib

import pytest

from evalcore.config import ConfigError, parse_config
from evalcore.kinds.base import KINDS, config_mistake, kinds_where
from evalcore.scorers.base import Scorer
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
