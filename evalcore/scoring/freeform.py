"""``evalcore score freeform``: text metrics of existing candidate/reference pairs, in a named profile.

Besides per-pair values and grouped means with bootstrap CIs, when the input has a ``condition``
column and an ``item_id`` column it reports the paired difference correct − every other condition
per metric (does the metric notice which audio the answer was about?) and whether the paraphrase
skyline scores above the adversarial rewrite.
"""

from __future__ import annotations

import json
import math
from typing import Optional

import numpy as np
import pandas as pd
import typer

from evalcore.metrics.base import Aggregate, mean_of
from evalcore.metrics.text_profiles import METRICS, PROFILES, score_pairs
from evalcore.reports.tables import contrasts
from evalcore.scoring.cli import score_app
from evalcore.scoring.io import (InputError, arrow_safe, default_group_by, fail, fmt, read_rows, summarize,
                                 write_outputs)

#: metrics of the issue that need models not available here yet
NOT_BUILT = ("bertscore", "cider", "claptext")
_RESERVED = {"candidate", "reference", "_input_error"}


def _aggregates(metrics: list[str], info: dict) -> list[Aggregate]:
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items())
    return [Aggregate(m, (m,), mean_of(), f"mean per-pair {info['definitions'][m]} [profile {info['profile']}; "
                                          f"{versions}; {info['wordnet']}]") for m in metrics]


def _rows_with_errors(df: pd.DataFrame, metrics: list[str], profile: str) -> tuple[pd.DataFrame, dict]:
    bad = df["_input_error"].map(lambda e: isinstance(e, str))
    refs = [None if b else r for r, b in zip(df["reference"], bad)]
    scores = score_pairs(refs, df["candidate"].tolist(), profile=profile)
    out = df.drop(columns=["_input_error"]).copy()
    for m in metrics:
        out[m] = scores.values[m]
    out["error"] = [e if b else err for e, b, err in zip(df["_input_error"], bad, scores.errors)]
    return out, {**scores.info, "corpus": scores.corpus}


def _table2(summary: pd.DataFrame, groups: list[str], metrics: list[str]) -> list[str]:
    """Rows = groups, columns = metrics, like the paper's Table 2."""
    vals = summary[summary["kind"] == "value"]
    lines = [f"| {' | '.join([*groups, 'n', *metrics])} |", "|" + "---|" * (len(groups) + 1 + len(metrics))]
    keyed = vals.groupby(groups, sort=True, dropna=False) if groups else [((), vals)]
    for key, g in keyed:
        key = key if isinstance(key, tuple) else (key,)
        cell = {r.metric: f"{fmt(r.value)} [{fmt(r.ci_low)}, {fmt(r.ci_high)}]" for r in g.itertuples()}
        lines.append(f"| {' | '.join([*map(str, key), str(int(g['n'].max())), *(cell.get(m, '') for m in metrics)])} |")
    return lines


def _skyline_check(summary: pd.DataFrame, groups: list[str], metrics: list[str]) -> list[str]:
    if "condition" not in groups:
        return []
    vals = summary[summary["kind"] == "value"].set_index([*groups, "metric"])["value"]
    others = [g for g in groups if g != "condition"]
    lines = []
    keys = summary[others].drop_duplicates().itertuples(index=False) if others else [()]
    for key in keys:
        key = tuple(key)
        for m in metrics:
            try:
                para = vals[(*key[: len(others)], "paraphrase", m)] if others else vals[("paraphrase", m)]
                adv = vals[(*key[: len(others)], "adversarial", m)] if others else vals[("adversarial", m)]
            except KeyError:
                continue
            lines.append(f"- {', '.join(map(str, key)) or 'all'} · {m}: paraphrase {fmt(para)} vs adversarial "
                         f"{fmt(adv)} → {'ranks the skyline above' if para > adv else 'does NOT rank the skyline above'}")
    return ["", "Paraphrase (skyline) vs adversarial rewrite:", "", *lines] if lines else []


@score_app.command("freeform")
def score_freeform(
    input_uri: str = typer.Argument(..., metavar="INPUT", help="Parquet or JSONL with `candidate`, `reference` "
                                    "and grouping columns (e.g. model, condition)."),
    out: str = typer.Option(..., "--out", help="Output directory (local path or s3://)."),
    profile: str = typer.Option("mullama", "--profile", help="mullama (the MU-LLaMA script) | standard"),
    metrics: str = typer.Option(",".join(METRICS), "--metrics", help="Comma-separated: bleu,bleu4,meteor,rouge"),
    group_by: Optional[str] = typer.Option(None, "--group-by", help="Comma-separated grouping columns "
                                           "(default: every scalar column but candidate/reference/item_id)."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    resamples: int = typer.Option(1000, "--resamples", help="Bootstrap resamples."),
) -> None:
    """Score candidate/reference pairs (BLEU, BLEU-4, METEOR, ROUGE) and compare conditions."""
    if profile not in PROFILES:
        fail("freeform", f"unknown --profile {profile!r}; choose one of {', '.join(PROFILES)}")
    wanted = [m.strip() for m in metrics.split(",") if m.strip()]
    missing = [m for m in wanted if m in NOT_BUILT]
    if missing:
        fail("freeform", f"metric(s) {missing} are not built yet (they need BERTScore/CIDEr/CLAP models); "
                         f"available: {', '.join(METRICS)}")
    unknown = [m for m in wanted if m not in METRICS]
    if unknown or not wanted:
        fail("freeform", f"unknown --metrics {unknown or wanted}; available: {', '.join(METRICS)}")
    try:
        df = read_rows(input_uri, ["candidate", "reference"])
    except InputError as e:
        fail("freeform", str(e), code=1)
    groups = (default_group_by(df, _RESERVED | {"item_id"}) if group_by is None
              else [c.strip() for c in group_by.split(",") if c.strip()])
    bad_groups = [c for c in groups if c not in df.columns or c in _RESERVED]
    if bad_groups:
        fail("freeform", f"--group-by: no such grouping column(s) {bad_groups}; columns: {list(df.columns)}")

    per_item, info = _rows_with_errors(df, wanted, profile)
    ok = per_item["error"].isna()
    scored = per_item[ok].assign(_row=np.arange(int(ok.sum())))
    aggs = _aggregates(wanted, info)
    unit = "item_id" if "item_id" in scored.columns and "item_id" not in groups else "_row"
    summary = summarize(scored, aggs, groups, unit=unit, resamples=resamples, seed=seed)
    if unit == "item_id" and "condition" in groups:
        others = [g for g in groups if g != "condition"]
        diff = contrasts(scored.assign(_all="all"), aggs, others or ["_all"], unit="item_id",
                         resamples=resamples, confidence=0.95, seed=seed)
        summary = pd.concat([summary, pd.DataFrame(diff).drop(columns=["_all"], errors="ignore")], ignore_index=True)
    counts = (len(per_item), int(ok.sum()), int((~ok).sum()))
    report = [f"# Free-form scores — profile `{profile}`", "",
              f"rows: {counts[0]} in = {counts[1]} scored + {counts[2]} errored", "",
              "Mean [95 % CI] per group:", "", *_table2(summary, groups, wanted)]
    diffs = summary[summary["kind"] == "paired_diff"]
    if len(diffs):
        report += ["", "Paired difference correct − condition (same items):", "",
                   *(f"- {', '.join(str(getattr(r, g)) for g in groups)} · {r.metric}: {fmt(r.value)} "
                     f"[{fmt(r.ci_low)}, {fmt(r.ci_high)}]" for r in diffs.itertuples())]
    report += _skyline_check(summary, groups, wanted)
    if info["corpus"]:
        report += ["", f"Corpus BLEU over all scored rows: {fmt(info['corpus'].get('corpus_bleu', math.nan))}"]
    report += ["", "Definitions:", "", f"```json\n{json.dumps(info, indent=1, default=str)}\n```", ""]
    write_outputs(out, arrow_safe(per_item), summary, "\n".join(report))
    typer.echo(f"rows: {counts[0]} in = {counts[1]} scored + {counts[2]} errored", err=True)
