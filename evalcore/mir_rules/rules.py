"""What CMI-Bench's scoring rules share: the rule interface, their registry, the released label normalisation and
a safe stand-in for the released scorer's ``eval`` of model responses.

Source: github.com/nicolaus625/CMI-bench, ``evaluate.py`` at commit 4c15f410 (the released scorer). Each task
family's rule is one module registered here under the family it scores (``@RULES.register(Family.KEY)``: the
families are :class:`evalcore.datasets.cmi_bench.Family`, each released task's in
:data:`evalcore.datasets.cmi_bench.TASKS`); the ``mir`` protocol's scorer (:mod:`evalcore.scorers.mir`) finds an
item's rule by its ``category``, the family the dataset gives its task. A rule scores one response against one
reference (row-local, so a run scores its rows a group at a time) into per-item columns; its aggregates are
functions of the item means of those columns, so every published figure — a mean over items, a pooled F1, an R²
after a corpus-wide normalisation — gets a bootstrap CI and paired differences under the listening controls like
any other metric.

Where the released scorer **stops** on a response (an uncaught exception ends ``evaluate.py``: no figure is
printed for the whole file), the rule raises :class:`PublishedStops`: that request becomes an error row of the
``score`` stage naming why — counted, never guessed.

``evaluate.py`` calls Python's ``eval`` on model responses (melody sequences, playing-technique events). evalcore
never evaluates model text: :func:`literal` parses it with :mod:`ast` and gives what ``eval`` gives for literals
(``ast.literal_eval``), raises the ``NameError`` / ``TypeError`` / ``SyntaxError`` that ``eval`` would raise for
an unknown name, a call of a literal (``[(0.5, 60) (1.0, 62)]``) or bad syntax (same parser, same messages), and
raises :class:`Unreproducible` for anything else ``eval`` would compute (arithmetic, builtins, indexing): those
responses are error rows saying so — counted, never guessed.
"""

from __future__ import annotations

import ast
import builtins
import warnings
from abc import ABC, abstractmethod
from typing import Any, Mapping

from evalcore.core.registry import Registry
from evalcore.stats.aggregate import Aggregate

__all__ = ["SOURCE", "Rule", "RULES", "PublishedStops", "Unreproducible", "normalise", "literal", "reference_of"]

#: the released scorer these rules follow
SOURCE = "github.com/nicolaus625/CMI-bench evaluate.py @ 4c15f410"


class PublishedStops(ValueError):
    """The released scorer would stop (an uncaught exception) on this response or reference."""


class Unreproducible(ValueError):
    """The released scorer's ``eval`` would compute an expression evalcore does not evaluate."""


class Rule(ABC):
    """One task family's released scoring rule: per-item columns from one (response, reference) pair."""

    name: str  #: the family it scores, set by its registration (``@RULES.register(Family.KEY)``)
    #: per-item metric columns this rule writes
    columns: tuple[str, ...]
    #: the figures the rule reports, each a function of the item means of ``columns``; the first is the primary
    #: one (higher is better), the one the listening verdict reads
    aggregates: tuple[Aggregate, ...]

    @abstractmethod
    def score(self, response: str, reference: Any, meta: Mapping[str, Any]) -> dict[str, float]:
        """The per-item columns; raises :class:`PublishedStops` or :class:`Unreproducible` (an error row)."""

    def versions(self) -> dict[str, str]:
        """The libraries this rule computes with, and their versions (provenance in run.json)."""
        return {}


RULES: Registry[Rule] = Registry("MIR rule", __package__ or "evalcore.mir_rules")  # loads evalcore/mir_rules/


def normalise(text: Any) -> str:
    """The released label normalisation: a list's first element; ``_ - ' space .`` removed, ``#`` → ``♯``,
    lower case."""
    if isinstance(text, list):
        text = text[0]
    return (str(text).replace("_", "").replace("-", "").replace("#", "\u266f").replace("'", "").replace(" ", "")
            .replace(".", "").lower())


def reference_of(reference: Any) -> Any:
    """A released ``correct_answer`` as the rules read it: a list's first element, else the value."""
    return reference[0] if isinstance(reference, list) and reference else reference


_LITERAL_NODES = (ast.Expression, ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Load)


def _check(node: ast.AST) -> None:
    """Raise what ``eval`` would for ``node`` where it would fail, :class:`Unreproducible` where it would compute."""
    if isinstance(node, ast.Name):
        if node.id in vars(builtins):
            raise Unreproducible(f"eval would resolve the builtin name {node.id!r}")
        raise NameError(f"name {node.id!r} is not defined")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
            and isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float)):
        return
    if isinstance(node, ast.Call):
        for child in (*node.args, *(k.value for k in node.keywords)):
            _check(child)
        if isinstance(node.func, (ast.Constant, ast.Tuple, ast.List, ast.Dict, ast.Set)):
            _check(node.func)
            raise TypeError(f"'{type(ast.literal_eval(node.func)).__name__}' object is not callable")
        _check(node.func)
        raise Unreproducible("eval would call a function")
    if not isinstance(node, _LITERAL_NODES):
        raise Unreproducible(f"eval would compute a {type(node).__name__} expression")
    for child in ast.iter_child_nodes(node):
        _check(child)


def literal(text: str) -> Any:
    """``eval(text)`` for the literals a response may hold, without evaluating anything (module docstring).

    Raises ``SyntaxError`` (CPython's own message), ``NameError`` or ``TypeError`` where ``eval`` raises them,
    :class:`Unreproducible` where ``eval`` would compute something, and :class:`PublishedStops` where CPython's
    parser gives up on the nesting (``"-" * 3000 + "1"``, ``"1+" * 3000``: ``RecursionError`` or ``MemoryError``
    — ``eval`` raises the same there, uncaught by the released scorer)."""
    try:
        with warnings.catch_warnings():  # "invalid decimal literal" and the like: one line a bad answer, not a log's
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text.strip(" \t"), mode="eval")  # eval() strips leading spaces and tabs as well
        _check(tree)
        return ast.literal_eval(tree)
    except (RecursionError, MemoryError) as e:
        raise PublishedStops(f"the text is nested too deeply for Python's parser ({type(e).__name__}): eval "
                             "stops there, and the released scorer with it") from None
