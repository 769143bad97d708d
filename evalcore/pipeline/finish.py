"""Stage 6 of a run, once every request is committed: the per-item and summary tables, errors, run.json, and the
reports (report.md, report.html, and beside a paper's published values with ``reproduces``); and the same
reports rendered again from a finished run's tables (:func:`rerender`)."""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd
import pyarrow as pa

from evalcore.reports import console

from evalcore.core import storage
from evalcore.runconfig.config import RunConfig
from evalcore.core.errors import bounded
from evalcore.pipeline import commit
from evalcore.pipeline.benchmarks import benchmarks
from evalcore.pipeline.browse import items_page
from evalcore.pipeline.graph import init_ray
from evalcore.pipeline.outcome import RunResult, check_error_budget, check_scored
from evalcore.pipeline.profile import Profile
from evalcore.pipeline.reduce import group_rows, reduce_rows
from evalcore.pipeline.resources import uses_audio
from evalcore.reports import markdown, model_card, published, report_html, verdict
from evalcore.reports.reproduction import compare, section
from evalcore.core.schema import ERRORS, SUMMARY, conform
from evalcore.scorers.freeform import rewrite_roles, uses_ray
from evalcore.scoring import audio_required
from evalcore.scoring.agreement import agreement
from evalcore.scoring.requests import error_rows
from evalcore.scoring.summary import summary_table
import evalcore

log = logging.getLogger("evalcore")


def scorer_params(cfg: RunConfig, model_infos: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """protocol instance → scorer keyword arguments: the free-form metrics config, the run's S3 options (for
    s3:// model files) and which models are reference-rewrite systems (by their recorded model_info); a mir
    protocol's configured embedder."""
    params: dict[str, dict[str, Any]] = {}
    for p in cfg.protocols:
        if p.kind_spec.text_metrics:
            params[p.name] = {"metrics": p.freeform_metrics(), "rewrites": rewrite_roles(model_infos),
                              "s3": cfg.storage.s3_options()}
        elif p.kind_spec.released_rules and p.similarity is not None:  # the tagging rule's embedder
            params[p.name] = {"similarity": p.similarity.model_dump()}
    return params


def card_meta(cfg: RunConfig) -> dict[str, Any] | None:
    """The model card's settings, published values and columns (each entry's model: ``models[].model``) for run.json
    (the report reads them there), or None."""
    if cfg.model_card is None:
        return None
    path = cfg.model_card.published
    return {"published": path, "values": model_card.read_published(storage.read_text(path)) if path else [],
            "columns": {m.name: m.model or m.name for m in cfg.models}}


def protocols_meta(cfg: RunConfig) -> dict[str, dict[str, Any]]:
    """protocol instance → what the report needs of its config (kind, breakdown share), for run.json."""
    return {p.name: {"kind": p.kind, "breakdown_min_share": p.breakdown_min_share} for p in cfg.protocols}


def finish(cfg: RunConfig, items_in: int, item_errors: list[dict], judged: list[dict] | None = None,
           warnings: list[str] | None = None, empty: list[str] | None = None,
           attempt: dict[str, int] | None = None, profile: Profile | None = None,
           on_tables: Callable[[], None] | None = None) -> RunResult:
    """Stage 6: per-item and summary tables, errors, run.json and report.md (with the data ``warnings``).

    A request its protocol's scorer cannot score (e.g. a free-form answer the metrics reject) becomes an
    error row of stage ``score`` here, counted with the others. ``empty``: the configured protocols left
    without a valid item (a warning in the report and the log; an error under ``max_error_rate``). ``profile``:
    the run's stages so far; the score and report stages are added, and it goes to run.json, the report's run
    section and the closing lines. ``on_tables``: called once the tables and run.json are written, before the report
(the trackers log them meanwhile, :mod:`evalcore.tracking.process`). Raises :class:`NothingScored` or :class:`ErrorBudgetExceeded` after everything
    is written."""
    profile = profile or Profile()
    with profile.driver("score") as rows:
        tables = _tables(cfg, items_in, item_errors, judged, empty)
        rows.update(rows_in=tables.reduced.requests_in, rows_out=len(tables.reduced.per_item))
    c, models, reduced, summary, errors = tables.counts, tables.models, tables.reduced, tables.summary, tables.errors
    root, out = cfg.root, storage.RunStorage(cfg.root)
    meta = {"name": cfg.name, "version": evalcore.__version__, "root": root,
            "created": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "resamples": cfg.stats.bootstrap_resamples, "confidence": cfg.stats.confidence,
            "seed": cfg.seeds.bootstrap, "min_items": cfg.stats.min_items, "models": models,
            "protocols": protocols_meta(cfg), "warnings": list(warnings or []), "reproduces": cfg.reproduces,
            "model_card": card_meta(cfg),
            "benchmarks": benchmarks(cfg, reduced.per_item, reduced.errors, reduced.requests_by_benchmark)}
    record = {"counts": c, "attempt": attempt or {}, "scoring": reduced.provenance}
    with profile.driver("report") as rows:  # the report shows the stages before its own (run.json has it too)
        meta["profile"] = profile.as_json()
        out.write_text(storage.join(root, "run.json"), json.dumps({**meta, **record}, indent=2, default=str))
        if on_tables is not None:
            on_tables()
        beside = reproduction(cfg, summary.to_pandas(), out, storage.join(root, "tables"))
        report, verdicts = write_reports(out.write_text, root, meta, c, summary.to_pandas(), errors.to_pandas(),
                                         beside)
        items_page(cfg)  # items.html beside the report: every answer beside its controls, with the clips heard
        rows.update(rows_in=len(summary))
    meta["profile"] = profile.as_json()
    out.write_text(storage.join(root, "run.json"), json.dumps({**meta, **record}, indent=2, default=str))
    for line in console.profile_lines(meta["profile"]):
        log.info("%s", line)
    result = RunResult(root=root, counts=c, report=report, verdicts=verdicts, attempt=attempt or {})
    check_scored(result, reduced.errors, item_errors)  # after the tables and report are written
    check_error_budget(result, reduced.errors, cfg.max_error_rate, item_errors=item_errors,
                       benchmarks=meta["benchmarks"])
    return result


@dataclass
class Tables:
    """What the score stage wrote: the counts, the models' identities, the reduction, the summary and errors."""

    counts: dict[str, Any]
    models: dict[str, Any]
    reduced: Any
    summary: pa.Table
    errors: pa.Table


def _tables(cfg: RunConfig, items_in: int, item_errors: list[dict], judged: list[dict] | None,
            empty: list[str] | None) -> Tables:
    """The score stage: per-item, summary, agreement and error tables written under ``tables/``."""
    root = cfg.root
    out = storage.RunStorage(root)
    tables = storage.join(root, "tables")
    rows_per_group = group_rows(cfg)
    if judged is None and rows_per_group is None:
        judged = commit.load_committed(root).rows
    if judged is not None:
        models: dict[str, Any] = {}
        for r in judged:
            if r.get("model_info") and r["model"] not in models:
                models[r["model"]] = r["model_info"]
    else:
        models = commit.model_infos(root, [m.name for m in cfg.models])
    params = scorer_params(cfg, models)
    if any(p.kind_spec.text_metrics and uses_ray(p.freeform_metrics()) for p in cfg.protocols):
        init_ray(cfg.ray)  # CLAPText embeds on Ray actors (the driver may not have started Ray: all rows committed)
    groups = [judged] if judged is not None else commit.iter_committed(root, rows_per_group)
    reduced = reduce_rows(groups, params, storage.join(tables, "per_item.parquet"), out, keep_rows=judged is not None)
    summary = summary_table(reduced.per_item, cfg.stats.bootstrap_resamples, cfg.stats.confidence,
                            cfg.seeds.bootstrap, params, errors=reduced.errors)
    errors = conform([{**e, "error": bounded(e.get("error"))} for e in item_errors + error_rows(reduced.errors)],
                     ERRORS)
    if judged is not None:
        agree, agree_rows, agree_left_out = agreement(cfg, judged, reduced.rows)
        if agree_rows:  # agreement_judge, if any
            summary = pa.concat_tables([summary, pa.Table.from_pylist(agree_rows, schema=summary.schema)])
            out.write_parquet(pa.Table.from_pandas(agree, preserve_index=False),
                              storage.join(tables, "agreement.parquet"))
            log.info("agreement: %d requests compared, %d left out (second judgment failed)", len(agree),
                     agree_left_out)
    out.write_parquet(summary, storage.join(tables, "summary.parquet"))
    out.write_parquet(errors, storage.join(tables, "errors.parquet"))
    _audio_required(cfg, reduced.per_item, params, out, tables)
    c = reduced.counts(items_in, len(item_errors))
    c["protocols_without_items"] = list(empty or [])
    for line in c["protocols_without_items"]:
        log.warning("WARNING: %s: its section is missing from the report (see the item errors)", line)
    if reduced.labels_dropped is not None:
        c["labels_dropped"] = reduced.labels_dropped  # out-of-vocabulary terms, never scored
    return Tables(c, models, reduced, summary, errors)


def _audio_required(cfg: RunConfig, per_item: pd.DataFrame, params: dict[str, Any], out: storage.RunStorage,
                    tables: str) -> None:
    """tables/answerable_without_audio.parquet (which items an answer without audio got right) and
    tables/audio_required.parquet (every model's figures without them), when the run answered without audio."""
    marked = audio_required.marks(per_item, [m.name for m in cfg.models if not uses_audio(m)])
    if marked.empty:
        return
    out.write_parquet(pa.Table.from_pandas(marked, preserve_index=False),
                      storage.join(tables, "answerable_without_audio.parquet"))
    rows = audio_required.summary_rows(per_item, marked, cfg.stats.bootstrap_resamples, cfg.stats.confidence,
                                       cfg.seeds.bootstrap, params)
    records = rows.astype(object).where(rows.notna(), None).to_dict("records")
    out.write_parquet(conform(records, SUMMARY), storage.join(tables, "audio_required.parquet"))


def reproduction(cfg: RunConfig, summary: pd.DataFrame, out: storage.RunStorage, tables: str) -> str:
    """With ``reproduces``: tables/reproduction.parquet (each published cell of its tables beside ours, and the
    papers' prose numbers the run computes) and its report section."""
    if cfg.reproduces is None:
        return ""
    rep = compare(summary, cfg.reproduces, cfg.published_values)
    out.write_parquet(pa.Table.from_pandas(rep, preserve_index=False), storage.join(tables, "reproduction.parquet"))
    return section(rep, cfg.reproduces, cfg.stats.confidence)


def write_reports(write_text: Callable[[str, str], None], root: str, meta: dict[str, Any], c: dict[str, Any],
                  summary: pd.DataFrame, errors: pd.DataFrame, beside: str = "") -> tuple[str, list[str]]:
    """report.md and report.html under ``root`` (``beside``: the run beside the paper, appended); returns the
    Markdown and the verdict line per model."""
    required = storage.join(root, "tables", "audio_required.parquet")
    required = storage.read_parquet(required).to_pandas() if storage.exists(required) else None
    report = markdown.render(meta, c, summary, errors, required) + beside
    write_text(storage.join(root, "report.md"), report)
    min_items, rewrites = int(meta.get("min_items") or verdict.MIN_ITEMS), markdown.rewrite_models(meta)
    write_text(storage.join(root, "report.html"), report_html.render(report, markdown.with_kinds(summary), min_items,
                                                                     rewrites, meta.get("model_card"),
                                                                     meta.get("benchmarks") or []))
    return report, verdict.verdict_lines(summary, min_items, rewrites)


def rerender(root: str) -> str:
    """Render report.md and report.html again from a finished run's tables (``evalcore report``)."""
    meta = json.loads(storage.read_text(storage.join(root, "run.json")))
    c = meta.pop("counts")
    summary = storage.read_parquet(storage.join(root, "tables", "summary.parquet")).to_pandas()
    errors = storage.read_parquet(storage.join(root, "tables", "errors.parquet")).to_pandas()
    beside, rep_uri = "", storage.join(root, "tables", "reproduction.parquet")
    if meta.get("reproduces") and storage.exists(rep_uri):
        beside = section(storage.read_parquet(rep_uri).to_pandas(), meta["reproduces"], float(meta["confidence"]))
    return write_reports(storage.write_text, root, meta, c, summary, errors, beside)[0]
