"""Free-form QA in the pipeline: the paper's text metrics per request, via :func:`score_pairs`.

The protocol's ``metrics`` config (:class:`evalcore.textmetrics.metric_config.FreeformMetrics`) picks a profile
(``mullama`` | ``standard``) and registered metric names (BLEU, BLEU-4, METEOR, ROUGE; BERTScore, CIDEr-D and
CLAPText with their models; any metric registered with ``METRICS``); the default is the ``mullama`` lexical
metrics, which need no model file. All free-form rows of a run are scored in one :func:`score_pairs` call, so a
corpus metric's IDF corpus (CIDEr-D's ``corpus``: one dataset × model × condition × prompt variant) is the run's
and BERTScore/CLAPText embed each distinct text once (CLAPText on ``clap.actors`` Ray actors when > 0). The answer
text is the candidate, the item's reference the reference.

A row :func:`score_pairs` cannot score (no reference, a text over its length limit, a library error,
or a whole metric failing) gets an ``error``: the pipeline makes it an error row (stage ``score``).

The reference-rewrite systems (:mod:`evalcore.models.reference_rewrite`) are recognised by their
recorded ``model_info`` (:func:`evalcore.core.schema.rewrite_roles`), not by name; :meth:`FreeformScorer.extra_rows` adds
the paired difference paraphrase skyline − adversarial rewrite per metric: ``kind = paired_diff``,
``model = paraphrase-adversarial`` (``paraphrase-adversarial:<P>:<A>`` when a run has several of
either), ``condition`` = the condition both were asked under.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

import pandas as pd

from evalcore.core.packages import metric_problem
from evalcore.kinds.scorer import Scorer
from evalcore.stats.aggregate import contrasts
from evalcore.stats.aggregate import Aggregate, mean_of
from evalcore.textmetrics.freeform_metric import metric_class, models_key
from evalcore.textmetrics.metric_config import FreeformMetrics
from evalcore.textmetrics.stream_values import decode
from evalcore.textmetrics.text_profiles import ModelMetrics, library_versions, lexical_names, model_metrics, score_pairs
from evalcore.textmetrics.wordnet import wordnet_version
# the rewrite roles are read from recorded model info (the schema's); re-exported for the pipeline's scorer params
from evalcore.core.schema import REWRITE_BACKEND, REWRITE_LABEL, REWRITE_ROLES, rewrite_roles  # noqa: F401


def _join(a: str | None, b: str | None) -> str | None:
    """One row's errors from two scoring calls (a row-check error appears in both: kept once)."""
    return a if b is None or b == a else b if a is None else f"{a}; {b}"


def aggregates(metrics: Sequence[str], info: Mapping[str, Any]) -> list[Aggregate]:
    """Mean per pair of each metric, its definition naming profile, library versions and WordNet (and, with
    ``chunks: mean``, that a chunked answer's value is its chunks' mean)."""
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items())
    tail = f"; {info['wordnet']}" if info.get("wordnet") else ""
    tail += "; a chunked answer: the mean over its chunks" if info.get("chunks") == "mean" else ""
    return [Aggregate(m, (m,), mean_of(), f"mean per-pair {info['definitions'][m]} [profile {info['profile']}; "
                                          f"{versions}{tail}]") for m in metrics]


def metric_info(cfg: FreeformMetrics, models: ModelMetrics, corpus: Sequence[str] | None = None) -> dict[str, Any]:
    """Profile, library versions, WordNet version (with a lexical metric), one definition per metric as the run
    states it (e.g. models by id and path, a corpus metric's corpus: ``corpus`` when the scorer was given one)
    and each metric's direction (for run.json)."""
    wordnet = f"WordNet {wordnet_version()}" if lexical_names(cfg.names) else None
    defs = {}
    for m in cfg.names:
        metric = models.metric(m, cfg.profile)
        if corpus is not None and metric.corpus:
            metric.corpus = tuple(corpus)  # type: ignore[misc]  (this instance's corpus: the scorer's)
        defs[m] = metric.run_definition()
    directions = {m: "higher is better" if metric_class(m).higher_is_better else "lower is better" for m in cfg.names}
    return {"profile": cfg.profile, "versions": library_versions(cfg.names), "wordnet": wordnet, "definitions": defs,
            "directions": directions, "chunks": cfg.chunks}


def needs_all_rows(names: Sequence[str]) -> bool:
    """Whether a metric among ``names`` is scored over all of a run's rows at once (a corpus metric: CIDEr-D's
    value for one answer depends on the others, its IDF corpus)."""
    return any(metric_class(n).corpus for n in names)


def uses_ray(cfg: FreeformMetrics) -> bool:
    """Whether the run's scorer runs a configured metric on Ray actors of its own (CLAPText with ``clap.actors``)."""
    return any(m.ray_actors() > 0 for m in cfg.built().values())


def streamed(names: Sequence[str]) -> list[str]:
    """The metrics among ``names`` the pipeline scores per pair in the stream (:mod:`evalcore.pipeline.stream_metrics`)."""
    return [n for n in names if metric_class(n).stream is not None]


class FreeformScorer(Scorer):
    """Free-form answers against their reference with the configured profile and metrics."""

    protocol = "freeform"
    summary_columns = ()  # the keys and metric columns only

    def __init__(self, metrics: FreeformMetrics | Mapping[str, Any] | None = None,
                 rewrites: Mapping[str, str] | None = None, s3: Mapping[str, Any] | None = None,
                 corpus: Sequence[str] | None = None) -> None:
        """``corpus``: the row fields whose values together name a corpus metric's corpus (default: the fields its
        metrics declare, e.g. CIDEr-D's dataset × model × condition × variant; ``()``: all rows one corpus)."""
        self.cfg = metrics if isinstance(metrics, FreeformMetrics) else FreeformMetrics.model_validate(metrics or {})
        self.models = model_metrics(self.cfg, s3)
        declared = tuple(dict.fromkeys(k for m in self.cfg.names for k in metric_class(m).corpus)) or ("dataset",)
        self.corpus = declared if corpus is None else tuple(corpus)
        self.rewrites = dict(rewrites or {})
        self.info = metric_info(self.cfg, self.models, corpus)
        self.columns = tuple(self.cfg.names)
        self.aggregates = tuple(aggregates(self.columns, self.info))
        self.last_run: dict[str, Any] = {}
        self.streamed: dict[str, int] = {}  # metric → rows whose value came from the pipeline's stream

    def score(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Metric values per row, plus ``error`` (None, or why the row could not be scored).

        The metrics the pipeline scores per pair (:func:`streamed`) are taken from a row's ``scores`` when it
        has them all; the rest of the rows get them here, and the others (e.g. CIDEr-D, its IDF corpus) are scored
        over all rows at once. The same function on the same pair, so the same values. A chunked answer is its
        chunks' texts joined (``chunks: join``) or each chunk scored and the values averaged (``chunks: mean``)."""
        if self.cfg.chunks == "mean" and any(len(r.get("chunk_texts") or ()) > 1 for r in rows):
            return self._chunk_means(rows)
        return self._score(rows)

    def _chunk_means(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``chunks: mean``: every chunk of a chunked answer scored as an answer of its own, then per row the mean
        of its chunks' values (a chunk without text is an empty answer; any chunk's error is the row's)."""
        parts, owner = [], []
        for i, r in enumerate(rows):
            texts = r.get("chunk_texts") or []
            if len(texts) > 1:
                parts += [{**r, "text": t or "", "scores": None} for t in texts]
                owner += [i] * len(texts)
            else:
                parts.append(r)
                owner.append(i)
        scored = self._score(parts)
        out: list[dict[str, Any]] = []
        for i in range(len(rows)):
            mine = [s for s, o in zip(scored, owner) if o == i]
            errors = [s["error"] for s in mine if s["error"] is not None]
            out.append({**{m: float(sum(s[m] for s in mine) / len(mine)) for m in self.columns},
                        "error": "; ".join(dict.fromkeys(errors)) if errors else None})
        return out

    def _score(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """:meth:`score` with each row's ``text`` as its answer."""
        if not rows:
            return []
        n = len(rows)
        refs, cands = [r.get("reference") for r in rows], [r.get("text") for r in rows]
        corpora = [tuple(str(r.get(k)) for k in self.corpus) for r in rows]
        in_stream = streamed(self.columns)
        key = models_key(self.cfg.model_dump())
        pre = [decode(r.get("scores"), self.cfg.profile, in_stream, key) if in_stream else None for r in rows]
        values = {m: [math.nan] * n for m in self.columns}
        errors: list[str | None] = [None] * n
        for i, p in enumerate(pre):
            for m, v in (p or {}).items():
                values[m][i] = v
        self.streamed = {m: self.streamed.get(m, 0) + sum(p is not None for p in pre) for m in in_stream}
        todo = [i for i, p in enumerate(pre) if p is None] if in_stream else []
        for part, metrics in ((todo, in_stream), (range(n), [m for m in self.columns if m not in in_stream])):
            if not part or not metrics:
                continue
            part = list(part)
            got, got_errors = self._computed([refs[i] for i in part], [cands[i] for i in part],
                                             [corpora[i] for i in part], metrics)
            for j, i in enumerate(part):
                errors[i] = _join(errors[i], got_errors[j])
                for m in metrics:
                    values[m][i] = got[m][j]
        return [{**{m: values[m][i] for m in self.columns}, "error": errors[i]} for i in range(n)]

    def _computed(self, refs: list[Any], cands: list[Any], corpora: list[tuple], metrics: list[str]
                  ) -> tuple[dict[str, list[float]], list[str | None]]:
        """:meth:`_pairs` for ``metrics``; with CLAPText on Ray actors, its call runs in a thread while this
        process computes the others, and a row's errors from both calls are joined."""
        remote = [m for m in metrics if self.models.metric(m, self.cfg.profile).ray_actors() > 0]
        local = [m for m in metrics if m not in remote]
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(self._pairs, refs, cands, corpora, remote) if remote else None
            values, errors = self._pairs(refs, cands, corpora, local) if local else ({}, [None] * len(refs))
            if pending is not None:
                more, more_errors = pending.result()
                values.update(more)
                errors = [_join(a, b) for a, b in zip(errors, more_errors)]
        return values, errors

    def _pairs(self, refs: list[Any], cands: list[Any], corpora: list[tuple], metrics: list[str]
               ) -> tuple[dict[str, list[float]], list[str | None]]:
        """:func:`score_pairs` for ``metrics``; a metric that cannot run at all (e.g. no Java for CIDEr-D)
        becomes every row's error."""
        try:
            got = score_pairs(refs, cands, profile=self.cfg.profile, metrics=metrics, models=self.models,
                              corpora=corpora)
        except Exception as e:
            reason = f"freeform metrics: {type(e).__name__}: {e}"[:500]
            return {m: [math.nan] * len(refs) for m in metrics}, [reason] * len(refs)
        self.last_run.update(got.info.get("models", {}))
        return {m: got.values[m] for m in metrics}, got.errors

    def provenance(self) -> dict[str, Any]:
        """Profile, versions, definitions and, per model metric, its model and run statistics (e.g. CLAPText's
        distinct texts and the texts its Ray actors embedded)."""
        return {**self.info, "models": self.last_run, "scored_in_stream": dict(self.streamed)}

    def extra_rows(self, pdf: pd.DataFrame, resamples: int, confidence: float, seed: int) -> list[dict]:
        """Paired differences paraphrase skyline − adversarial rewrite per metric, over the items both scored,
        per dataset × variant × condition, overall and per task when there are several."""
        present = set(pdf["model"])
        paras = sorted(m for m, r in self.rewrites.items() if r == "paraphrase" and m in present)
        advs = sorted(m for m, r in self.rewrites.items() if r == "adversarial" and m in present)
        tasks = sorted(pdf["task"].dropna().unique())
        defs = {agg.name: agg.definition for agg in self.aggregates}
        out: list[dict] = []
        for p in paras:
            for a in advs:
                label = REWRITE_LABEL if len(paras) == len(advs) == 1 else f"{REWRITE_LABEL}:{p}:{a}"
                both = pdf[pdf["model"].isin([p, a])]
                groups = [("all", both)] + ([(f"task={t}", both[both["task"] == t]) for t in tasks]
                                            if len(tasks) > 1 else [])
                for group, gdf in groups:
                    rows = contrasts(gdf.assign(group=group), self.aggregates,
                                     ["protocol", "dataset", "variant", "group", "condition"], column="model",
                                     reference=p, resamples=resamples, confidence=confidence, seed=seed)
                    for r in rows:
                        r["model"] = label
                        r["definition"] = (f"paired difference paraphrase skyline ({p}) − adversarial rewrite ({a}) "
                                           f"over items scored by both; {defs[r['metric']]}")
                    out += rows
        return out


def preflight(cfg: FreeformMetrics, where: str) -> list[str]:
    """What would make every free-form row fail, checked before any model runs, one line per problem naming the
    field under ``where`` (the protocol's ``metrics``): each metric's packages (its ``requires``), then what it
    says itself (:meth:`~evalcore.textmetrics.freeform_metric.FreeformMetric.problems`: WordNet for METEOR, Java for
    CIDEr-D, local model files that are missing)."""
    problems = [f"{where}.names: {name}: {gap}" for name in cfg.names
                if (gap := metric_problem(metric_class(name).requires)) is not None]
    built = cfg.built()
    return problems + [f"{where}.{field}: {reason}" for name in cfg.names for field, reason in built[name].problems()]
