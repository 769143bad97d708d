"""``evalcore score freeform``: text metrics of existing candidate/reference pairs, in a named profile.

Besides per-pair values and grouped means with bootstrap CIs, when the input has a ``condition``
column and an ``item_id`` column it reports the paired difference correct − every other condition
per metric (does the metric notice which audio the answer was about?) and whether the paraphrase
skyline scores above the adversarial rewrite.

Model-based metrics (``--metrics ...,bertscore,cider,claptext``) need their models on local disk
or ``s3://`` (never a hub): ``--bertscore-model`` (a local copy of roberta-large for ``mullama``),
``--clap-checkpoint``/``--clap-tokenizer`` (laion's checkpoint and roberta's vocab.json/merges.txt);
``--ray`` embeds CLAP texts on Ray actors. CIDEr's IDF corpus is the rows sharing ``--cider-corpus``
columns (default: ``model`` and ``condition`` where present, i.e. one evaluation run).
``DIR/definitions.json`` records profile, library versions and model ids/paths.
"""

from __future__ import annotations

import json
import math
from typing import Optional

import numpy as np
import pandas as pd
import typer

from evalcore import storage
from evalcore.reports.freeform import skyline_check, table2
from evalcore.reports.tables_html import fmt
from evalcore.score_cli.app import score_app
from evalcore.score_cli.io import (InputError, arrow_safe,
                                   default_group_by, exit_if_unscored, fail, quiet_mode, read_rows, say, summarize,
                                   write_outputs)
from evalcore.score_cli.option_groups import COMMON, Common, takes_groups
from evalcore.scorers.freeform import aggregates
from evalcore.stats.aggregate import contrasts
from evalcore.textmetrics.freeform_metric import registered
from evalcore.textmetrics.registered.bertscore import BertScoreConfig
from evalcore.textmetrics.registered.cider import MetricUnavailable
from evalcore.textmetrics.registered.clap_text import ClapTextConfig
from evalcore.textmetrics.text_profiles import PROFILES, ModelMetrics, lexical_names, score_pairs

_RESERVED = {"candidate", "reference", "_input_error"}


def _corpora(df: pd.DataFrame, cols: list[str]) -> list | None:
    return [tuple(r) for r in df[cols].astype(str).itertuples(index=False)] if cols else None


def _rows_with_errors(df: pd.DataFrame, metrics: list[str], profile: str, models: ModelMetrics,
                      corpus_cols: list[str]) -> tuple[pd.DataFrame, dict]:
    bad = df["_input_error"].map(lambda e: isinstance(e, str))
    refs = [None if b else r for r, b in zip(df["reference"], bad)]
    scores = score_pairs(refs, df["candidate"].tolist(), profile=profile, metrics=metrics, models=models,
                         corpora=_corpora(df, corpus_cols))
    out = df.drop(columns=["_input_error"]).copy()
    for m in metrics:
        out[m] = scores.values[m]
    out["error"] = [e if b else err for e, b, err in zip(df["_input_error"], bad, scores.errors)]
    return out, {**scores.info, "corpus": scores.corpus}


@score_app.command("freeform")
@takes_groups
def score_freeform(
    input_uri: str = typer.Argument(..., metavar="INPUT", help="Parquet or JSONL with `candidate`, `reference` "
                                    "and grouping columns (e.g. model, condition)."),
    out: str = typer.Option(..., "--out", help="Output directory (local path or s3://)."),
    profile: str = typer.Option("mullama", "--profile", help="mullama (the MU-LLaMA script) | standard"),
    metrics: Optional[str] = typer.Option(None, "--metrics", help="Comma-separated: bleu,bleu4,meteor,rouge,"
                                          "bertscore,cider,claptext (default: the lexical ones, bleu to rouge)"),
    group_by: Optional[str] = typer.Option(None, "--group-by", help="Comma-separated grouping columns "
                                           "(default: every scalar column but candidate/reference/item_id)."),
    common: Common = COMMON,
    bertscore_model: Optional[str] = typer.Option(None, "--bertscore-model", help="Local model directory for "
                                                  "BERTScore (mullama: a copy of roberta-large)."),
    bertscore_id: Optional[str] = typer.Option(None, "--bertscore-id", help="Published name of that model "
                                               "(default: the directory name), e.g. roberta-large."),
    bertscore_layers: Optional[int] = typer.Option(None, "--bertscore-layers", help="Layer (default: bert_score's "
                                                   "for the model id, 17 for roberta-large)."),
    bertscore_batch_size: int = typer.Option(64, "--bertscore-batch-size", min=1, help="Sentence pairs BERTScore "
                                             "embeds at once."),
    bertscore_baseline: Optional[str] = typer.Option(None, "--bertscore-baseline", help="Rescaling baseline .tsv "
                                                     "(standard profile; default: bert_score's file for the id)."),
    clap_checkpoint: Optional[str] = typer.Option(None, "--clap-checkpoint", help="laion CLAP checkpoint (.pt), "
                                                  "local or s3:// (paper: music_audioset_epoch_15_esc_90.14.pt)."),
    clap_tokenizer: Optional[str] = typer.Option(None, "--clap-tokenizer", help="Directory with roberta-base's "
                                                 "vocab.json and merges.txt, local or s3://."),
    use_ray: bool = typer.Option(False, "--ray/--no-ray", help="Embed CLAP texts on Ray actors (RAY_ADDRESS or local)."),
    clap_actors: int = typer.Option(1, "--clap-actors", min=1, help="Ray actors for CLAP (with --ray)."),
    device: str = typer.Option("cpu", "--device", help="torch device for BERTScore and CLAP."),
    cider_corpus: Optional[str] = typer.Option(None, "--cider-corpus", help="Columns whose rows share CIDEr's IDF "
                                               "(default: model,condition where present; '' = all rows)."),
) -> None:
    """Score candidate/reference pairs (BLEU, BLEU-4, METEOR, ROUGE, BERTScore, CIDEr-D, CLAPText)."""
    quiet_mode(common.quiet)
    if profile not in PROFILES:
        fail("freeform", f"unknown --profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if metrics is None:  # read here, not at import: the registry loads the metrics on first use
        metrics = ",".join(lexical_names())
    wanted = [m.strip() for m in metrics.split(",") if m.strip()]
    unknown = [m for m in wanted if m not in registered()]
    if unknown or not wanted:
        fail("freeform", f"unknown --metrics {unknown or wanted}; available: {', '.join(registered())}")
    models = _models(wanted, bertscore_model, bertscore_id, bertscore_layers, bertscore_batch_size,
                     bertscore_baseline, clap_checkpoint, clap_tokenizer, use_ray, clap_actors, device)
    try:
        df = read_rows(input_uri, ["candidate", "reference"])
    except InputError as e:
        fail("freeform", str(e))
    groups = (default_group_by(df, _RESERVED | {"item_id"}) if group_by is None
              else [c.strip() for c in group_by.split(",") if c.strip()])
    bad_groups = [c for c in groups if c not in df.columns or c in _RESERVED]
    if bad_groups:
        fail("freeform", f"--group-by: no such grouping column(s) {bad_groups}; columns: {list(df.columns)}")
    corpus_cols = ([c for c in ("model", "condition") if c in df.columns] if cider_corpus is None
                   else [c.strip() for c in cider_corpus.split(",") if c.strip()])
    if [c for c in corpus_cols if c not in df.columns]:
        fail("freeform", f"--cider-corpus: no such column(s) {[c for c in corpus_cols if c not in df.columns]}")

    try:
        per_item, info = _rows_with_errors(df, wanted, profile, models, corpus_cols)
    except (MetricUnavailable, FileNotFoundError, ValueError) as e:
        fail("freeform", str(e))
    if "cider" in wanted:
        info["cider_corpus"] = corpus_cols
    ok = per_item["error"].isna()
    scored = per_item[ok].assign(_row=np.arange(int(ok.sum())))
    aggs = aggregates(wanted, info)
    unit = "item_id" if "item_id" in scored.columns and "item_id" not in groups else "_row"
    summary = summarize(scored, aggs, groups, unit=unit, resamples=common.resamples, seed=common.seed)
    if unit == "item_id" and "condition" in groups:
        others = [g for g in groups if g != "condition"]
        diff = contrasts(scored.assign(_all="all"), aggs, others or ["_all"], unit="item_id",
                         resamples=common.resamples, confidence=0.95, seed=common.seed)
        summary = pd.concat([summary, pd.DataFrame(diff).drop(columns=["_all"], errors="ignore")], ignore_index=True)
    counts = (len(per_item), int(ok.sum()), int((~ok).sum()))
    report = [f"# Free-form scores — profile `{profile}`", "",
              f"rows: {counts[0]} in = {counts[1]} scored + {counts[2]} errored", "",
              "Mean [95 % CI] per group:", "", *table2(summary, groups, wanted)]
    diffs = summary[summary["kind"] == "paired_diff"]
    if len(diffs):
        report += ["", "Paired difference correct − condition (same items):", "",
                   *(f"- {', '.join(str(getattr(r, g)) for g in groups)} · {r.metric}: {fmt(r.value)} "
                     f"[{fmt(r.ci_low)}, {fmt(r.ci_high)}]" for r in diffs.itertuples())]
    report += skyline_check(summary, groups, wanted)
    if info["corpus"]:
        report += ["", f"Corpus BLEU over all scored rows: {fmt(info['corpus'].get('corpus_bleu', math.nan))}"]
    report += ["", "Definitions:", "", f"```json\n{json.dumps(info, indent=1, default=str)}\n```", ""]
    write_outputs(out, arrow_safe(per_item), summary, "\n".join(report))
    storage.write_text(storage.join(out, "definitions.json"), json.dumps(info, indent=1, default=str))
    say(common.quiet, f"rows: {counts[0]} in = {counts[1]} scored + {counts[2]} errored")
    exit_if_unscored("freeform", per_item["error"], counts[1])


def _models(wanted: list[str], bs_model: str | None, bs_id: str | None, bs_layers: int | None, bs_batch: int,
            bs_baseline: str | None, clap_ckpt: str | None, clap_tok: str | None, use_ray: bool, actors: int,
            device: str) -> ModelMetrics:
    """Model configs for the metrics asked for; a missing one exits 2 naming the option."""
    bert = clap = None
    if "bertscore" in wanted:
        if not bs_model:
            fail("freeform", "bertscore needs --bertscore-model PATH (a local model directory; mullama: roberta-large)")
        bert = BertScoreConfig(model=bs_model, model_id=bs_id, num_layers=bs_layers, batch_size=bs_batch,
                               device=device, baseline=bs_baseline)
        try:
            bert.layers()
        except ValueError as e:
            fail("freeform", f"{e} (--bertscore-layers)")
    if "claptext" in wanted:
        if not (clap_ckpt and clap_tok):
            fail("freeform", "claptext needs --clap-checkpoint URI and --clap-tokenizer DIR (local or s3://)")
        clap = ClapTextConfig(checkpoint=clap_ckpt, tokenizer=clap_tok, device=device, actors=actors if use_ray else 0)
    s3 = storage.current().s3
    settings = {name: c for name, c in (("bertscore", bert), ("claptext", clap)) if c is not None}
    return ModelMetrics(settings=settings, s3={"endpoint_override": s3.endpoint_override, "region": s3.region,
                                               "scheme": s3.scheme} if clap is not None else None)
