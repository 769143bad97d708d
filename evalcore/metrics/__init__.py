"""Metrics: one scorer per protocol, registered by protocol name; importing this package registers the free-form
metrics with ``METRICS`` (in this order: the order their versions and definitions are stated in)."""

from __future__ import annotations

from evalcore.metrics import bleu, bleu4, meteor, rouge, bertscore, cider, clap_text  # noqa: F401 (registrations)
from evalcore.metrics.base import Aggregate, Scorer
from evalcore.metrics.factual import FactualScorer
from evalcore.metrics.factual_formats import BinaryChoiceScorer, TrueFalseScorer
from evalcore.metrics.freeform import FreeformScorer
from evalcore.metrics.mcq import MCQScorer
from evalcore.metrics.mir import MirScorer
from evalcore.registry import Registry

SCORERS: Registry[Scorer] = Registry("scorer")
for _cls in (FreeformScorer, FactualScorer, MCQScorer, TrueFalseScorer, BinaryChoiceScorer, MirScorer):
    SCORERS.register(_cls.protocol)(_cls)

__all__ = ["SCORERS", "Aggregate", "Scorer"]
