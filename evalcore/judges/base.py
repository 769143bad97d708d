"""The judge interface: response texts in, one :class:`Judgment` per text out; and the judges' registry.

A judge is one module in this package with one ``@JUDGES.register("name")`` class that satisfies :class:`Judge`
(most derive from :class:`JudgeBase`, which gives the defaults). The judge stage
(:func:`evalcore.pipeline.stages.judge_batch`), the agreement judge (:mod:`evalcore.scoring.agreement`) and the
``evalcore score`` commands call judges through this protocol only: what a judge reads besides the texts and
option lists (each row's task, each request's question) it declares in ``uses_tasks`` and ``uses_questions``,
and ``version`` goes into the ``judge`` column as ``name@version``.

A judge that follows a benchmark's **published rule** (MMAU's, MMAR's, MMAU-Pro's, RUListening's, MuChoMusic's
scorer) names it in ``rule`` (:class:`~evalcore.core.schema.PublishedRule`) and gives two verdicts per response:
``parsed_index``, evalcore's strict reading (the one option named, never guessed), and ``credited``, the options
the released scorer would count right for that response, its quirks included. The MCQ scorer makes the published
verdict the default figure (``accuracy``) and the strict one its twin (``accuracy_strict``), docs/benchmarks.md;
the scoring stage hands it :func:`published_rule` (the scorers import no judge).
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, Sequence, TypedDict, runtime_checkable

from evalcore.core.registry import Registry
from evalcore.core.schema import PublishedRule

__all__ = ["JUDGES", "JUDGMENT_FIELDS", "Judge", "JudgeBase", "Judgment", "PublishedRule", "build_judge",
           "published_rule"]


class Judgment(TypedDict, total=False):
    """What a judge says of one response (the judged row's columns, :data:`evalcore.core.schema.JUDGMENT`).

    An MCQ or binary-choice judge sets ``parsed_index`` (-1: unanswered), a label judge ``extracted`` (the labels
    named, ``[]``: none) and, where it proposes labels outside the vocabulary, ``dropped`` (how many). An MCQ judge
    that follows a published rule (:class:`PublishedRule`) also sets ``credited``: the options (indices, in the
    order shown) its released scorer would count right for this response were each the answer — one, none, or
    several where the rule credits a response for more than one option (MMAU's choices with the same words). A
    response that cannot be judged (none came back, no options to choose from, an endpoint failed) sets ``error``,
    a bounded reason, and may set ``error_class`` (:mod:`evalcore.core.errors`); its other fields are then not read.
    """

    parsed_index: int | None
    credited: list[int] | None
    extracted: list[str] | None
    dropped: int
    embedding_key: str | None
    error: str
    error_class: str | None


#: the fields of a :class:`Judgment` the judge stage copies into a judged row (all but the error's)
JUDGMENT_FIELDS: tuple[str, ...] = tuple(k for k in Judgment.__annotations__ if not k.startswith("error"))


@runtime_checkable
class Judge(Protocol):
    """What the pipeline reads of a judge: its registered ``name``, its ``version``, what it reads besides the
    texts and options, and :meth:`judge`."""

    name: str
    version: str
    #: ``judge`` is passed ``tasks`` (each row's task), e.g. to pick a lexicon per row
    uses_tasks: bool
    #: ``judge`` is passed ``questions`` (each request's question), e.g. to show an LLM matcher
    uses_questions: bool

    def judge(self, texts: list[str | None], options: list[list[str] | None], *,
              tasks: Sequence[str | None] | None = None,
              questions: Sequence[str | None] | None = None) -> list[Judgment]:
        """One :class:`Judgment` per text; ``options[i]`` are text ``i``'s options (None for a label task)."""
        ...


class JudgeBase:
    """Defaults of :class:`Judge`: version "1", no tasks, no questions, no published rule (the registration sets
    ``name``)."""

    name: ClassVar[str]
    version: str = "1"
    uses_tasks: bool = False
    uses_questions: bool = False
    #: the published rule this judge follows (None: evalcore's own rule, its ``parsed_index`` the only verdict)
    rule: ClassVar[PublishedRule | None] = None


JUDGES: Registry[Judge] = Registry("judge", __package__ or "evalcore.judges")


def published_rule(label: str | None) -> PublishedRule | None:
    """The published rule of the judge a judged row names (its ``judge`` column, ``name@version``); None for a
    judge of evalcore's own rule, or a name that is not registered."""
    name = str(label or "").split("@", 1)[0]
    if not name or name not in JUDGES:
        return None
    return getattr(JUDGES.get(name), "rule", None)


def build_judge(kind: str, **params: Any) -> Judge:
    """The registered judge ``kind`` built with ``params``; a :class:`TypeError` if it does not satisfy
    :class:`Judge` (a mistake in the judge's code, found before any response is judged)."""
    judge = JUDGES.build(kind, **params)
    if not isinstance(judge, Judge):
        missing = [m for m in ("name", "version", "uses_tasks", "uses_questions", "judge") if not hasattr(judge, m)]
        raise TypeError(f"judge {kind!r} ({type(judge).__name__}) is not a Judge: it lacks {', '.join(missing)}")
    return judge
