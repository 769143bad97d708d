"""The ``mir`` protocol's scorer: each item scored by its task family's released rule (``category`` = the rule's
name in :data:`evalcore.mir_rules.rules.RULES`), with the rule's own figures as the summary's metrics.

An item's columns come from its response and reference alone (row-local: a run scores its rows a group at a time);
a column of another rule is left empty. Each summary group reports the figures of the rules its rows use
(:meth:`MirScorer.aggregates_for`): a dataset holding one CMI-Bench task reports that task's figures; a dataset
mixing tasks of one rule (GTZAN and VocalSet accuracy) reports them pooled over its tasks, and per task.

A response a rule cannot score the released way (the released scorer would stop on it, or evalcore will not
evaluate what it would) becomes an error row of the ``score`` stage with the reason — counted in ``errored``,
never guessed. Every rule is called through the scoring guard (:mod:`evalcore.core.guard`): an exception no rule
expects (a ``RecursionError``, an ``OverflowError``) is that row's error, class ``output``, never the run's; and
each answer is cut to its family's cap before parsing (:mod:`evalcore.mir_rules.caps`; per-item ``truncated``).

In a run the rules score in the stream, on the workers' judged batches (:func:`score_batch`, a stage after the
judge, as the free-form lexical metrics do): each whole request's columns go into its row's ``scores`` (JSON) and
are committed with it, so the scoring overlaps the models instead of following the last answer. The run's scorer
takes them as they are and computes only what is missing (a chunked request, a row of an older run): the same
function on the same row, so the same values.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import pandas as pd
import pyarrow as pa

from evalcore.datasets.cmi_bench import Family
from evalcore.core.embedders import EmbedderSpec, spec_of
from evalcore.core.errors import INPUT, OUTPUT
from evalcore.core.guard import guarded
from evalcore.mir_rules import tagging as cmi_tagging
from evalcore.mir_rules.caps import cut
from evalcore.mir_rules.rules import RULES, SOURCE, PublishedStops, Rule, Unreproducible
from evalcore.kinds.scorer import Scorer
from evalcore.stats.aggregate import Aggregate

__all__ = ["MirScorer", "rule_of", "PRIMARY", "score_batch", "STREAM_KEY"]

#: the key marking a row's ``scores`` as the mir rules' columns (the free-form metrics' JSON has "profile")
STREAM_KEY = "mir_rule"
#: the libraries the released rules compute with (each rule imports its own when it first scores): ``evalcore
#: validate`` checks they import, as it checks a model's packages
REQUIRES = ("mir_eval", "jiwer", "num2words", "pretty_midi", "sklearn", "scipy")


def _union(parts: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    seen: dict[Any, None] = {}
    for p in parts:
        seen.update(dict.fromkeys(p))
    return tuple(seen)


def _all_rules(similarity: EmbedderSpec | None = None) -> list[Rule]:
    """Every rule; the tagging rule with the protocol's configured embedder (its ``similarity``), if any."""
    return [cmi_tagging.configured(similarity) if n == Family.TAGGING else RULES.build(n) for n in RULES.names()]


#: each rule's primary figure (higher is better), the one the listening verdict and the model card read
PRIMARY = {r.name: r.aggregates[0].name for r in _all_rules()}


def rule_of(row: dict[str, Any]) -> str | None:
    """The rule name of a request or per-item row (its ``category``)."""
    c = row.get("category")
    return c if isinstance(c, str) and c in RULES else None


def _meta(row: dict[str, Any]) -> dict[str, Any]:
    m = row.get("metadata")
    if isinstance(m, str) and m:
        try:
            m = json.loads(m)
        except json.JSONDecodeError:
            return {}
    return m if isinstance(m, dict) else {}


class MirScorer(Scorer):
    """Scores ``mir`` requests by their rule; each group reports its rules' figures."""

    protocol = "mir"
    columns = _union([r.columns for r in _all_rules()] + [("truncated",)])
    aggregates = tuple({a.name: a for r in _all_rules() for a in r.aggregates}.values())
    #: the tagging rule's per-item vectors, which its AUC rows read (:func:`evalcore.mir_rules.tagging.auc_rows`)
    summary_columns = ("tag_vectors",)

    def __init__(self, similarity: Mapping[str, Any] | EmbedderSpec | None = None) -> None:
        self.rules = {r.name: r for r in _all_rules(spec_of(similarity))}
        self._used: set[str] = set()

    def score(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for r in rows:
            name = rule_of(r)
            if name is None:
                out.append({"error": f"unknown MIR rule {str(r.get('category'))[:40]!r}; known: "
                                     f"{', '.join(RULES.names())}"})
                continue
            self._used.add(name)
            stored = _stored(r.get("scores"), name)
            if stored is not None:  # scored in the stream (score_batch): the same function on the same row
                out.append(stored)
                continue
            out.append(self.score_one(name, r))
        return out

    def score_one(self, name: str, r: dict[str, Any]) -> dict[str, Any]:
        """One row's columns by rule ``name`` (or its ``error`` and ``error_class``), with ``truncated``: the
        characters of the answer over the family's cap (:mod:`evalcore.mir_rules.caps`), cut before parsing.
        The rule is called through the scoring guard (:func:`evalcore.core.guard.guarded`): whatever it raises on this
        answer is this row's error, never the run's."""
        text, truncated = cut(name, str(r.get("text") or ""))
        reference = r.get("reference")
        if isinstance(reference, str) and cut(name, reference)[1]:
            return {"error": f"{name}: the reference is over the {name} cap ({len(reference)} characters): "
                             "not scored", "error_class": INPUT}
        got, why = guarded(name, self._score, name, text, reference, r)
        if why is not None:
            return {"error": why, "error_class": OUTPUT}
        return {**got, "truncated": truncated}

    def _score(self, name: str, text: str, reference: Any, r: dict[str, Any]) -> dict[str, Any]:
        try:
            meta = {**_meta(r), "task": r.get("task")}
            return self.rules[name].score(text, reference, meta)
        except (PublishedStops, Unreproducible) as e:
            return {"error": f"{name}: {e}"}
        except (ValueError, TypeError) as e:  # e.g. a reference the released code cannot read either
            return {"error": f"{name}: the released scorer fails on this row ({type(e).__name__}: {str(e)[:80]})"}

    def aggregates_for(self, df: pd.DataFrame) -> tuple[Aggregate, ...]:
        """The figures of the rules ``df``'s rows use (those all of them share, when it mixes rules)."""
        names = [n for n in pd.unique(df["category"].astype(object)) if isinstance(n, str) and n in self.rules] \
            if "category" in df.columns else []
        if not names:
            return ()
        common = set.intersection(*({a.name for a in self.rules[n].aggregates} for n in names))
        chosen: dict[str, Aggregate] = {}
        for n in names:
            for a in self.rules[n].aggregates:
                if a.name in common:
                    chosen.setdefault(a.name, a)
        return tuple(chosen.values())

    def extra_rows(self, df: pd.DataFrame, *, resamples: int, confidence: float, seed: int) -> list[dict[str, Any]]:
        """The tagging figures (ROC-AUC, PR-AUC: not means of item values) with their CIs and paired differences."""
        if "category" not in df.columns:
            return []
        tagging = df[df["category"].astype(object) == Family.TAGGING]
        rule = self.rules[Family.TAGGING]
        return cmi_tagging.auc_rows(tagging, resamples=resamples, confidence=confidence, seed=seed,
                                    embedder=getattr(rule, "embedder", cmi_tagging.STAND_IN)) if len(tagging) else []

    def provenance(self) -> dict[str, Any]:
        """The released scorer followed and the libraries of the rules used, with their versions."""
        if not self._used:
            return {}
        versions: dict[str, str] = {}
        for n in sorted(self._used):
            versions.update(self.rules[n].versions())
        return {"source": SOURCE, "rules": sorted(self._used), "libraries": versions}


def _stored(scores: Any, name: str) -> dict[str, Any] | None:
    """The columns :func:`score_batch` stored in a row's ``scores`` for rule ``name``, or None."""
    if not isinstance(scores, str) or STREAM_KEY not in scores:
        return None
    try:
        got = json.loads(scores)
    except json.JSONDecodeError:
        return None
    if not isinstance(got, dict) or got.get(STREAM_KEY) != name:
        return None
    return {k: v for k, v in got.items() if k != STREAM_KEY}


_SCORERS: dict[str, MirScorer] = {}  # per configured similarity, one per worker process: libraries load once


def _scorer(similarity: Mapping[str, Any] | None) -> MirScorer:
    key = json.dumps(similarity, sort_keys=True)
    if key not in _SCORERS:
        _SCORERS[key] = MirScorer(similarity)
    return _SCORERS[key]


def score_batch(batch: pa.Table, protocols: Sequence[str],
                similarity: Mapping[str, Mapping[str, Any] | None] | None = None) -> pa.Table:
    """``batch`` (judged rows) with ``scores`` set, for the rows of the ``mir`` protocol instances ``protocols``
    that are whole requests without error, to their rule's columns (or the rule's error) as JSON; ``similarity``:
    protocol → its configured embedder (the tagging rule's), where one is."""
    if not protocols or batch.num_rows == 0:
        return batch
    cols = {k: batch.column(k).to_pylist() for k in ("protocol", "n_chunks", "error")}
    todo = [i for i, p in enumerate(cols["protocol"]) if p in protocols and cols["error"][i] is None
            and int(cols["n_chunks"][i] or 1) == 1]
    if not todo:
        return batch
    rows = batch.take(todo).select(["category", "text", "reference", "metadata", "task"]).to_pylist()
    scores = batch.column("scores").to_pylist()
    for i, r in zip(todo, rows):
        name = rule_of(r)
        if name is not None:
            scorer = _scorer((similarity or {}).get(cols["protocol"][i]))
            scores[i] = json.dumps({STREAM_KEY: name, **scorer.score_one(name, r)})
    return batch.set_column(batch.schema.get_field_index("scores"), batch.schema.field("scores"),
                            pa.array(scores, pa.string()))
