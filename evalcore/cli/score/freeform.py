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

Each input row is one request of a free-form job that the scoring stage scores with the run's scorer
(:class:`evalcore.scorers.freeform.FreeformScorer`, its metrics config built from the options, as a run's protocol
config gives it); a model file that is missing fails first, as a run's preflight finds it, naming its option.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Optional

import pandas as pd
import typer

from evalcore.core import storage
from evalcore.reports.freeform import skyline_check, table2
from evalcore.reports.tables_html import fmt
from evalcore.cli.score.app import score_app
from evalcore.cli.score.io import arrow_safe, fail, quiet_mode, summarize, write_outputs
from evalcore.cli.score.option_groups import (COMMON, OUT, Common, OptionGroup, config_option, group_by_option,
                                              flag_of, input_argument, option, takes_groups)
from evalcore.cli.score.stage import score_judged
from evalcore.cli.score.steps import (Counts, bootstrap_unit, close, columns, group_columns, read_input,
                                      scored_rows)
from evalcore.scorers.freeform import aggregates, preflight
from evalcore.stats.aggregate import contrasts
from evalcore.textmetrics.freeform_metric import metric_class, registered
from evalcore.textmetrics.registered.bertscore import BertScoreConfig
from evalcore.textmetrics.registered.cider import MetricUnavailable
from evalcore.textmetrics.metric_config import FreeformMetrics
from evalcore.textmetrics.registered.clap_text import ClapTextConfig
from evalcore.textmetrics.text_profiles import (PROFILES, corpus_aggregates, corpus_definitions, lexical_names,
                                               row_rules)

_RESERVED = {"candidate", "reference", "_input_error"}


@dataclass(frozen=True)
class ModelOptions(OptionGroup):
    """The model-based metrics' models (local or ``s3://``, never a hub) and where they run."""

    bertscore_model: Optional[str] = config_option(BertScoreConfig, "model", "--bertscore-model")
    bertscore_id: Optional[str] = config_option(BertScoreConfig, "model_id", "--bertscore-id")
    bertscore_layers: Optional[int] = config_option(BertScoreConfig, "num_layers", "--bertscore-layers")
    bertscore_batch_size: int = config_option(BertScoreConfig, "batch_size", "--bertscore-batch-size", min=1)
    bertscore_baseline: Optional[str] = config_option(BertScoreConfig, "baseline", "--bertscore-baseline")
    clap_checkpoint: Optional[str] = config_option(ClapTextConfig, "checkpoint", "--clap-checkpoint")
    clap_tokenizer: Optional[str] = config_option(ClapTextConfig, "tokenizer", "--clap-tokenizer")
    use_ray: bool = option(False, "--ray/--no-ray", help="Embed CLAP texts on Ray actors (RAY_ADDRESS or local).")
    clap_actors: int = option(1, "--clap-actors", min=1, help="Ray actors for CLAP (with --ray).")
    device: str = config_option(BertScoreConfig, "device", "--device")  # BERTScore's and CLAPText's

    def sections(self, wanted: list[str]) -> dict[str, dict]:
        """The metrics config's sections (``bertscore``, ``clap``) for the metrics asked for, as a run's protocol
        config holds them; a missing or wrong one exits 2 naming the option."""
        out = {}
        if "bertscore" in wanted:
            if not self.bertscore_model:
                fail("freeform", "bertscore needs --bertscore-model PATH (a local model directory; mullama: "
                                 "roberta-large)")
            bert = BertScoreConfig(model=self.bertscore_model, model_id=self.bertscore_id,
                                   num_layers=self.bertscore_layers, batch_size=self.bertscore_batch_size,
                                   device=self.device, baseline=self.bertscore_baseline)
            try:
                bert.layers()
            except ValueError as e:
                fail("freeform", f"{e} (--bertscore-layers)")
            out["bertscore"] = bert.model_dump(exclude_unset=True)
        if "claptext" in wanted:
            if not (self.clap_checkpoint and self.clap_tokenizer):
                fail("freeform", "claptext needs --clap-checkpoint URI and --clap-tokenizer DIR (local or s3://)")
            out["clap"] = ClapTextConfig(checkpoint=self.clap_checkpoint, tokenizer=self.clap_tokenizer,
                                         device=self.device, actors=self.clap_actors if self.use_ray else 0
                                         ).model_dump(exclude_unset=True)
        self._check({"profile": "mullama", "names": wanted, **out})
        return out

    def _check(self, config: dict[str, Any]) -> None:
        """What would make every row fail (a model file that is missing, Java for CIDEr-D, ...), as a run's
        preflight finds it, exits 2 before any model runs, naming the option that sets the field."""
        sections = {c.section: c.Params for n in registered() if (c := metric_class(n)).section}
        for line in preflight(FreeformMetrics.model_validate(config), "metrics"):
            where, _, reason = line.partition(": ")
            section, _, name = where.removeprefix("metrics.").partition(".")
            flag = flag_of(ModelOptions, sections[section], name) if section in sections else None
            fail("freeform", f"{reason} ({flag})" if flag else line)


#: a command's default for its ``models: ModelOptions`` parameter (the options come from the command line)
MODELS = ModelOptions()


def _rows_with_errors(df: pd.DataFrame, metrics: dict[str, Any], corpus_cols: list[str]
                      ) -> tuple[pd.DataFrame, dict]:
    """Each input row scored as one request of a free-form job by the scoring stage (the run's scorer, its
    metrics config ``metrics``; CIDEr-D's corpus = the rows sharing ``corpus_cols``' values), the rows the input
    reader refused keeping their reason; and the scorer's provenance with the corpus figures of the scored pairs."""
    bad = df["_input_error"].map(lambda e: isinstance(e, str))
    jobs = [{"request_id": str(i), "text": c, "reference": r, **{k: rec[k] for k in corpus_cols}}
            for i, (c, r, b, rec) in enumerate(zip(df["candidate"], df["reference"], bad,
                                                   df[corpus_cols].to_dict("records"))) if not b]
    s3 = storage.current().s3
    stage = score_judged(jobs, "freeform", {
        "metrics": metrics, "corpus": corpus_cols,
        "s3": {"endpoint_override": s3.endpoint_override, "region": s3.region, "scheme": s3.scheme}})
    out = df.drop(columns=["_input_error"]).copy()
    for m in metrics["names"]:
        out[m] = [stage.metrics.get(str(i), {}).get(m, math.nan) for i in range(len(df))]
    out["error"] = [e if b else stage.errors.get(str(i)) for i, (e, b) in enumerate(zip(df["_input_error"], bad))]
    pairs = [(r, c) for i, (r, c) in enumerate(zip(out["reference"], out["candidate"])) if str(i) in stage.metrics]
    corpus = corpus_aggregates(pairs, metrics["profile"], metrics["names"])
    info = {**stage.provenance, "metrics": metrics["names"], **row_rules(), "corpus": corpus}
    info["definitions"] = info["definitions"] | corpus_definitions(metrics["profile"], metrics["names"])
    return out, info


@score_app.command("freeform")
@takes_groups
def score_freeform(
    input_uri: str = input_argument("with `candidate`, `reference` and grouping columns (e.g. model, condition)."),
    out: str = OUT,
    profile: str = typer.Option("mullama", "--profile", help="mullama (the MU-LLaMA script) | standard"),
    metrics: Optional[str] = typer.Option(None, "--metrics", help="Comma-separated: bleu,bleu4,meteor,rouge,"
                                          "bertscore,cider,claptext (default: the lexical ones, bleu to rouge)"),
    group_by: Optional[str] = group_by_option("candidate/reference"),
    common: Common = COMMON,
    models: ModelOptions = MODELS,
    cider_corpus: Optional[str] = typer.Option(None, "--cider-corpus", help="Columns whose rows share CIDEr's IDF "
                                               "(default: model,condition where present; '' = all rows)."),
) -> None:
    """Score candidate/reference pairs (BLEU, BLEU-4, METEOR, ROUGE, BERTScore, CIDEr-D, CLAPText)."""
    quiet_mode(common.quiet)
    wanted = _wanted(profile, metrics)
    config = {"profile": profile, "names": wanted, **models.sections(wanted)}
    df = read_input("freeform", input_uri, ["candidate", "reference"])
    groups = group_columns("freeform", df, group_by, _RESERVED)
    corpus_cols = _corpus_columns(df, cider_corpus)
    try:
        per_item, info = _rows_with_errors(df, config, corpus_cols)
    except (MetricUnavailable, FileNotFoundError, ValueError) as e:
        fail("freeform", str(e))
    if "cider" in wanted:
        info["cider_corpus"] = corpus_cols
    summary = _summary(per_item, wanted, info, groups, common)
    counts = Counts.of(per_item["error"])
    write_outputs(out, arrow_safe(per_item), summary, _report(profile, counts, summary, groups, wanted, info))
    storage.write_text(storage.join(out, "definitions.json"), json.dumps(info, indent=1, default=str))
    close("freeform", counts, per_item["error"], quiet=common.quiet)


def _wanted(profile: str, metrics: Optional[str]) -> list[str]:
    """The ``--metrics`` asked for (default: the lexical ones); an unknown profile or metric exits 2."""
    if profile not in PROFILES:
        fail("freeform", f"unknown --profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if metrics is None:  # read here, not at import: the registry loads the metrics on first use
        metrics = ",".join(lexical_names())
    wanted = columns(metrics)
    unknown = [m for m in wanted if m not in registered()]
    if unknown or not wanted:
        fail("freeform", f"unknown --metrics {unknown or wanted}; available: {', '.join(registered())}")
    return wanted


def _corpus_columns(df: pd.DataFrame, cider_corpus: Optional[str]) -> list[str]:
    """``--cider-corpus`` columns (default: ``model`` and ``condition`` where present); a missing one exits 2."""
    corpus_cols = ([c for c in ("model", "condition") if c in df.columns] if cider_corpus is None
                   else columns(cider_corpus))
    if [c for c in corpus_cols if c not in df.columns]:
        fail("freeform", f"--cider-corpus: no such column(s) {[c for c in corpus_cols if c not in df.columns]}")
    return corpus_cols


def _summary(per_item: pd.DataFrame, wanted: list[str], info: dict, groups: list[str], common: Common
             ) -> pd.DataFrame:
    """Mean per group with bootstrap CIs; with items and conditions, the paired differences correct − condition."""
    scored = scored_rows(per_item)
    aggs = aggregates(wanted, info)
    unit = bootstrap_unit(scored, groups)
    summary = summarize(scored, aggs, groups, unit=unit, resamples=common.resamples, seed=common.seed)
    if unit == "item_id" and "condition" in groups:
        others = [g for g in groups if g != "condition"]
        diff = contrasts(scored.assign(_all="all"), aggs, others or ["_all"], unit="item_id",
                         resamples=common.resamples, confidence=0.95, seed=common.seed)
        summary = pd.concat([summary, pd.DataFrame(diff).drop(columns=["_all"], errors="ignore")], ignore_index=True)
    return summary


def _report(profile: str, counts: Counts, summary: pd.DataFrame, groups: list[str], wanted: list[str],
            info: dict) -> str:
    """The Markdown report: counts, means per group, paired differences, the skyline check, definitions."""
    report = [f"# Free-form scores — profile `{profile}`", "", counts.line, "",
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
    return "\n".join(report)
