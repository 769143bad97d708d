"""The protocol-kind interface and its registry: what every other package asks of a protocol's kind.

A kind is one module in this package plus one ``@KINDS.register("name")`` line on its :class:`ProtocolKind`
subclass. It sits on the bottom floor (docs/layers.md): it imports nothing of evalcore but the registry, so the item
checks, the config, the request expansion, the scoring stage and the reports all read it. Its scorer lives with the
metrics (or, for a kind of one module, in the kind's module itself) and is named by its import path, which the
scoring stage resolves (:func:`evalcore.scoring.requests.build_scorer`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from evalcore.core.registry import Registry


class ProtocolKind:
    """What a protocol kind is; the defaults describe a kind that asks a question and scores the answer alone."""

    name: ClassVar[str]  #: set by the registration
    #: ``"module:Class"`` of the kind's scorer (an :class:`evalcore.kinds.scorer.Scorer`)
    scorer: ClassVar[str]
    #: the judge that reads its answers when the config names none (None: its answers are scored as text)
    judge: ClassVar[str | None] = None
    #: its answers are read into labels of a closed vocabulary; the default judge is fitted to the datasets' tasks
    #: (:func:`evalcore.runconfig.vocab_fit.default_judge`)
    vocabulary: ClassVar[bool] = False
    #: its default judge reads labels of a vocabulary fitted to its datasets' tasks, and its items' labels must lie
    #: in the judge's vocabulary (an item whose every label is outside is an error row)
    labels_in_vocabulary: ClassVar[bool] = False
    #: how its items' options reach the prompt: ``shuffled`` (one request per option order, seeded), ``fixed`` (in
    #: the item's own order), or None (no options shown)
    options: ClassVar[Literal["shuffled", "fixed"] | None] = None
    #: in-context examples and template sets apply (the items are multiple choice)
    in_context: ClassVar[bool] = False
    #: free-form text metrics score its answers against the reference (``ProtocolConfig.metrics``)
    text_metrics: ClassVar[bool] = False
    #: CMI-Bench's released rules score its answers in the stream (``ProtocolConfig.similarity`` configures one)
    released_rules: ClassVar[bool] = False
    #: what its item rows need beyond item_id, protocol, audio_uri and question, as JSON Schema (``required``,
    #: ``properties``): ``evalcore schema items`` prints it; :meth:`check_row` is the check that runs
    row_schema: ClassVar[dict[str, Any]] = {}
    #: its item rows must name the correct option (``correct_option``, or ``correct_index``)
    needs_correct_option: ClassVar[bool] = False
    #: its prompt variants when the config gives none (``ProtocolConfig.variants`` replaces them): name → template
    #: (placeholders ``{question} {options} {letters} {vocabulary}``)
    variants: ClassVar[dict[str, str]] = {"default": "{question}"}
    #: how the item browser reads a request's outcome: ``choice`` (right / wrong / unparsed from
    #: :attr:`score_column` and :attr:`answered_column`), ``labels`` (by the per-item F1: partial between right and
    #: wrong, unparsed when no label was named), or None (``scored``: a similarity, neither right nor wrong)
    outcome: ClassVar[Literal["choice", "labels"] | None] = None
    #: the per-item column read as a request's score (None: the first free-form metric column, for text metrics)
    score_column: ClassVar[str | None] = None
    #: the per-item column saying whether anything was read from the answer (``choice`` outcomes)
    answered_column: ClassVar[str | None] = None
    #: per-item columns the item browser shows beside the answer
    shown_columns: ClassVar[tuple[str, ...]] = ()
    #: the figures the listening verdict reads of a protocol of this kind, the first it has (its strict twin where a
    #: published rule gives both); none of them: a kind scored by text metrics reads its first metric
    listening: ClassVar[tuple[str, ...]] = ()
    #: the figure a model card shows for its benchmarks when their records name none
    card_metric: ClassVar[str | None] = None
    #: fields of a protocol's config that only this kind takes → the sentence said when another kind sets one
    config_fields: ClassVar[dict[str, str]] = {}

    @classmethod
    def check_row(cls, row: dict[str, Any]) -> str | None:
        """The reason an item row of this kind lacks what the kind needs, or None (the common fields are checked
        by :func:`evalcore.datasets.validate.validated` before)."""
        return None


KINDS: Registry[type[ProtocolKind]] = Registry("protocol", __package__)


def kind_of(name: str | None) -> type[ProtocolKind] | None:
    """The registered kind ``name``, or None (a name from another version's tables, or none)."""
    return KINDS.get(name) if isinstance(name, str) and name in KINDS else None


def kinds_where(capability: str, value: Any = True) -> list[str]:
    """The names of the kinds whose ``capability`` attribute is ``value`` (default: set), e.g.
    ``kinds_where("text_metrics")``, ``kinds_where("options", "shuffled")``."""
    return [n for n in KINDS.names()
            if (bool(getattr(KINDS.get(n), capability)) if value is True else getattr(KINDS.get(n), capability) == value)]


def config_mistake(kind: str, values: dict[str, Any]) -> str | None:
    """The sentence for a protocol config of ``kind`` (its fields' ``values``) that gives a field only another kind
    takes, or None. A field is given when it holds something: not None, 0, empty, or a list of zeros."""
    own = KINDS.get(kind).config_fields
    for other in KINDS.names():
        for f, sentence in KINDS.get(other).config_fields.items():
            if f not in own and _given(values.get(f)):
                return sentence
    return None


def _given(v: Any) -> bool:
    return any(v) if isinstance(v, (list, tuple)) else v is not None and v is not False and v != 0
