"""Free-form QA in the pipeline: the paper's text metrics per request, via :func:`score_pairs`.

The protocol's ``metrics`` config (:class:`evalcore.config.FreeformMetrics`) picks a profile
(``mullama`` | ``standard``) and metric names (BLEU, BLEU-4, METEOR, ROUGE; BERTScore, CIDEr-D and
CLAPText with their models); the default is the ``mullama`` lexical metrics, which need no model file.
All free-form rows of a run are scored in one :func:`score_pairs` call, so CIDEr-D's IDF corpus is
one dataset × model × condition × prompt variant and BERTScore/CLAPText embed each distinct text once
(CLAPText on ``clap.actors`` Ray actors when > 0). The answer text is the candidate, the item's
reference the reference.

A row :func:`score_pairs` cannot score (no reference, a text over its length limit, a library error,
or a whole metric failing) gets an ``error``: the pipeline makes it an error row (stage ``score``).

The reference-rewrite systems (:mod:`evalcore.models.reference_rewrite`) are recognised by their
recorded ``model_info`` (:func:`evalcore.schema.rewrite_roles`), not by name; :meth:`FreeformScorer.extra_rows` adds
the paired difference paraphrase skyline − adversarial rewrite per metric: ``kind = paired_diff``,
``model = paraphrase-adversarial`` (``paraphrase-adversarial:<P>:<A>`` when a run has several of
either), ``condition`` = the condition both were asked under.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

import pandas as pd

from evalcore.config import FreeformMetrics
from evalcore.metrics.base import Aggregate, Scorer, mean_of
from evalcore.metrics.stage import MODEL_METRICS
from evalcore.metrics.text_profiles import DEFINITIONS, METRICS, ModelMetrics, library_versions, score_pairs
# the rewrite roles are read from recorded model info (the schema's); re-exported for the pipeline's scorer params
from evalcore.schema import REWRITE_BACKEND, REWRITE_LABEL, REWRITE_ROLES, rewrite_roles  # noqa: F401

CIDER_CORPUS = ("dataset", "model", "condition", "variant")


def _join(a: str | None, b: str | None) -> str | None:
    """One row's errors from two scoring calls (a row-check error appears in both: kept once)."""
    return a if b is None or b == a else b if a is None else f"{a}; {b}"


def aggregates(metrics: Sequence[str], info: Mapping[str, Any]) -> list[Aggregate]:
    """Mean per pair of each metric, its definition naming profile, library versions and WordNet."""
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items())
    tail = f"; {info['wordnet']}" if info.get("wordnet") else ""
    return [Aggregate(m, (m,), mean_of(), f"mean per-pair {info['definitions'][m]} [profile {info['profile']}; "
                                          f"{versions}{tail}]") for m in metrics]


def model_metrics(cfg: FreeformMetrics, s3: Mapping[str, Any] | None = None) -> ModelMetrics:
    """The :class:`ModelMetrics` of the configured model-based metrics (``s3``: the run's S3 options)."""
    from evalcore.metrics.bertscore import BertScoreConfig
    from evalcore.metrics.clap_text import ClapTextConfig

    bert = clap = None
    if "bertscore" in cfg.names and cfg.bertscore is not None:
        b = cfg.bertscore
        bert = BertScoreConfig(model=b.model, num_layers=b.num_layers, model_id=b.model_id, batch_size=b.batch_size,
                               device=b.device, baseline_path=b.baseline)
    actors = 0
    if "claptext" in cfg.names and cfg.clap is not None:
        c = cfg.clap
        clap = ClapTextConfig(checkpoint=c.checkpoint, tokenizer=c.tokenizer, device=c.device,
                              batch_size=c.batch_size, s3=dict(s3) if s3 else None)
        actors = c.actors
    return ModelMetrics(bertscore=bert, clap=clap, clap_ray_actors=actors)


def metric_info(cfg: FreeformMetrics, models: ModelMetrics) -> dict[str, Any]:
    """Profile, library versions, WordNet version and one definition per metric (models by id and path)."""
    defs: dict[str, str] = {}
    wordnet = None
    if any(m in METRICS for m in cfg.names):
        from evalcore.metrics.wordnet import wordnet_version

        wordnet = f"WordNet {wordnet_version()}"
    for m in cfg.names:
        if m in METRICS:
            defs[m] = DEFINITIONS[cfg.profile][m]
        elif m == "bertscore":
            from evalcore.metrics import bertscore

            assert models.bertscore is not None  # FreeformMetrics validated it
            defs[m] = bertscore.definition(models.bertscore, cfg.profile)
        elif m == "cider":
            from evalcore.metrics import cider

            defs[m] = f"{cider.definition()} (corpus = one {' x '.join(CIDER_CORPUS)})"
        else:
            from evalcore.metrics import clap_text

            assert models.clap is not None
            defs[m] = (f"{clap_text.definition(models.clap)} (checkpoint path {models.clap.checkpoint}, tokenizer "
                       f"{models.clap.tokenizer}; Ray actors: {models.clap_ray_actors})")
    return {"profile": cfg.profile, "versions": library_versions(cfg.names), "wordnet": wordnet, "definitions": defs}


#: metrics scored over all of a run's rows at once: CIDEr-D's value for one answer depends on the others (its
#: IDF corpus)
GROUPED_METRICS = frozenset({"cider"})
#: metrics the pipeline scores per pair in the stream (:mod:`evalcore.metrics.stage`)
STREAMED = (*METRICS, *MODEL_METRICS)


class FreeformScorer(Scorer):
    """Free-form answers against their reference with the configured profile and metrics."""

    protocol = "freeform"
    summary_columns = ()  # the keys and metric columns only

    def __init__(self, metrics: FreeformMetrics | Mapping[str, Any] | None = None,
                 rewrites: Mapping[str, str] | None = None, s3: Mapping[str, Any] | None = None) -> None:
        self.cfg = metrics if isinstance(metrics, FreeformMetrics) else FreeformMetrics.model_validate(metrics or {})
        self.models = model_metrics(self.cfg, s3)
        self.rewrites = dict(rewrites or {})
        self.info = metric_info(self.cfg, self.models)
        self.columns = tuple(self.cfg.names)
        self.aggregates = tuple(aggregates(self.columns, self.info))
        self.last_run: dict[str, Any] = {}
        self.streamed: dict[str, int] = {}  # metric → rows whose value came from the pipeline's stream

    def score(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Metric values per row, plus ``error`` (None, or why the row could not be scored).

        The metrics the pipeline scores per pair (:data:`STREAMED`) are taken from a row's ``scores`` when it
        has them all; the rest of the rows get them here, and CIDEr-D is scored over all rows at once (its
        IDF corpus). The same function on the same pair, so the same values."""
        from evalcore.metrics.stage import decode, models_key

        if not rows:
            return []
        n = len(rows)
        refs, cands = [r.get("reference") for r in rows], [r.get("text") for r in rows]
        corpora = [tuple(str(r.get(k)) for k in CIDER_CORPUS) for r in rows]
        streamed = [m for m in self.columns if m in STREAMED]
        key = models_key(self.cfg.model_dump())
        pre = [decode(r.get("scores"), self.cfg.profile, streamed, key) if streamed else None for r in rows]
        values = {m: [math.nan] * n for m in self.columns}
        errors: list[str | None] = [None] * n
        for i, p in enumerate(pre):
            for m, v in (p or {}).items():
                values[m][i] = v
        self.streamed = {m: self.streamed.get(m, 0) + sum(p is not None for p in pre) for m in streamed}
        todo = [i for i, p in enumerate(pre) if p is None] if streamed else []
        for part, metrics in ((todo, streamed), (range(n), [m for m in self.columns if m not in STREAMED])):
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
        remote = [m for m in metrics if m == "claptext" and self.models.clap_ray_actors > 0]
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
        from evalcore.metrics.aggregate import contrasts  # (metrics.aggregate imports this package)

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
    """What would make every free-form row fail, checked before any model runs (each message names the
    config field ``where``): the metrics' packages, WordNet for METEOR, Java for CIDEr-D, local model files that
    are missing."""
    import os
    import shutil

    from evalcore import storage

    from evalcore.packages import metric_problem

    problems = [f"{where}.names: {name}: {gap}" for name in cfg.names if (gap := metric_problem(name)) is not None]
    if "meteor" in cfg.names:
        from evalcore.metrics.wordnet import check_wordnet

        try:
            check_wordnet()  # found (or provisioned), not loaded: loading takes seconds
        except Exception as e:  # WordNetUnavailable, with the fix in its message
            problems.append(f"{where}.names: meteor: {e}")
    if "cider" in cfg.names and shutil.which("java") is None:
        from evalcore.metrics.cider import JAVA_FIX

        problems.append(f"{where}.names: cider: {JAVA_FIX}")
    if "bertscore" in cfg.names and cfg.bertscore is not None:
        if not os.path.isfile(os.path.join(cfg.bertscore.model, "config.json")):
            problems.append(f"{where}.bertscore.model: {cfg.bertscore.model!r} is not a local model directory with "
                            "config.json (models are never downloaded)")
    if "claptext" in cfg.names and cfg.clap is not None:
        for name in ("checkpoint", "tokenizer"):
            uri = getattr(cfg.clap, name)
            if not storage.is_s3(uri) and not os.path.exists(uri):
                problems.append(f"{where}.clap.{name}: {uri!r} does not exist")
    return problems
