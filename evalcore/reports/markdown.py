"""Render a run's tables as a Markdown report."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from evalcore.kinds.base import kinds_where
from evalcore.reports import audio_required as required_report
from evalcore.reports import freeform as freeform_report
from evalcore.reports import mcq as mcq_report
from evalcore.reports import description, listening_curve, listening_profile, model_card, readings, run_profile, verdict
from evalcore.reports.browser_links import difference_href
from evalcore.core.schema import ERRORED, REWRITE_LABEL, VERDICTS_DIFFER, rewrite_roles


#: metrics shown in the listening table (the summary table has them all)
HEADLINE = ("f1_micro", "f1_macro", "accuracy", "accuracy_strict", "accuracy_any", "accuracy_majority", "consistency", "bleu",
            "key_weighted_score", "f_measure", "word_accuracy", "melody_accuracy", "frame_f1_micro", "r2", "roc_auc")


def _fmt(v: float, lo: float, hi: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if lo is None or math.isnan(lo):
        return f"{v:.3f}"
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]"


def _md_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def with_kinds(summary: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with ``protocol_kind`` filled (summaries of runs before protocol instances: the name)."""
    if summary.empty:
        return summary.assign(protocol_kind=pd.Series(dtype=object)) if "protocol_kind" not in summary else summary
    kinds = summary["protocol_kind"] if "protocol_kind" in summary.columns else pd.Series(None, index=summary.index)
    return summary.assign(protocol_kind=kinds.where(kinds.notna() & (kinds != ""), summary["protocol"]))


def render(meta: dict[str, Any], counts: dict[str, Any], summary: pd.DataFrame, errors: pd.DataFrame,
           audio_required: pd.DataFrame | None = None) -> str:
    """The report: first the verdict per model (does it listen?), then counts, per-protocol results with CIs,
    the listening test, errors and definitions; every section is keyed by the protocol instance's name (several
    instances of one kind are reported apart). ``meta["min_items"]``: the fewest paired items a difference needs
    to decide anything (``stats.min_items``). ``audio_required``: ``tables/audio_required.parquet`` when the run
    has one (the items that need the audio)."""
    summary = with_kinds(summary)
    conf = int(round(100 * meta.get("confidence", 0.95)))
    min_items = int(meta.get("min_items") or verdict.MIN_ITEMS)
    out = [f"# evalcore report — {meta.get('name', '')}", ""]
    out.append(f"evalcore {meta.get('version')} · run root `{meta.get('root')}` · created {meta.get('created')} · "
               f"bootstrap: {meta.get('resamples')} resamples, {conf} % percentile CIs, seed {meta.get('seed')}")
    out += verdict.section(summary, conf, min_items, rewrite_models(meta))
    card = model_card.section(summary, meta.get("model_card"), min_items, rewrite_models(meta),
                              meta.get("benchmarks") or [])
    profile = listening_profile.section(summary, audio_required, min_items, rewrite_models(meta))
    if card:  # the card opens the report and says each model's profile in a line; the table follows it
        out += card + listening_profile.card_lines(summary, audio_required, min_items, rewrite_models(meta),
                                                   (meta.get("model_card") or {}).get("columns"))
    out += profile
    out += readings.section(summary)  # a published rule's figure and the strict reading's, what rests on quirks
    out += ["", "## Counts", ""]
    out.append(_md_table(["", "in", "scored / valid", "errored"], [
        ["items", counts["items_in"], counts["items_valid"], counts["items_errored"]],
        ["requests", counts["requests_in"], counts["requests_scored"], counts["requests_errored"]],
    ]))
    ok = counts["requests_in"] == counts["requests_scored"] + counts["requests_errored"]
    out += ["", f"Requests in = scored + errored: {counts['requests_in']} = {counts['requests_scored']} + "
                f"{counts['requests_errored']} ({'reconciled' if ok else 'MISMATCH'})."]
    if counts.get("models"):  # each model's errored share, the worst first
        shares = sorted(counts["models"].items(), key=lambda kv: (-float(kv[1]["error_share"]), kv[0]))
        out += ["", "Errored requests by model: " + ", ".join(
            f"{m} {v['requests_errored']} of {v['requests_in']} ({float(v['error_share']):.1%})" for m, v in shares)
            + "."]
    dead = [b for b in meta.get("benchmarks") or [] if b.get("requests_errored")]
    if dead:  # each benchmark's errored share, the worst first
        dead.sort(key=lambda b: (-b["requests_errored"] / max(b["requests_in"], 1), b["protocol"], b["dataset"]))
        out += ["", "Errored requests by benchmark: " + ", ".join(
            f"{b['protocol']} · {b['dataset']} {b['requests_errored']} of {b['requests_in']} "
            f"({b['requests_errored'] / max(b['requests_in'], 1):.1%})" for b in dead) + "."]
    if counts.get("labels_dropped") is not None:
        out += ["", f"Out-of-vocabulary labels dropped by the label extractor (never scored): "
                    f"{counts['labels_dropped']} (column `dropped` of per_item)."]
    out += _warnings(meta, counts)
    if summary.empty:
        out += ["", "No request was scored."]
    else:
        out += _results(summary, conf)
        out += _freeform(summary, conf, meta.get("models") or {}, min_items)  # Table 2, discrimination statistics
        out += _listening(summary, conf, min_items)
        out += listening_curve.section(summary, conf)
        out += description.section(summary, conf)
        out += required_report.section(audio_required, summary, conf)
        out += mcq_report.sections(summary, conf, meta.get("protocols") or {}, min_items)  # attention test, breakdowns
    out += _errors(errors)
    if not summary.empty:
        defs = summary[summary["kind"] == "value"].drop_duplicates(["protocol", "metric"])
        out += ["", "## Metric definitions", ""]
        out.append(_md_table(["protocol", "metric", "definition"],
                             [[r.protocol, r.metric, r.definition] for r in defs.itertuples()]))
    if meta.get("models"):
        out += ["", "## Models", ""]
        out.append(_md_table(["model", "identity"], [[k, f"`{v}`"] for k, v in meta["models"].items()]))
    out += run_profile.section(meta.get("profile"))
    return "\n".join(out) + "\n"


def _warnings(meta: dict[str, Any], counts: dict[str, Any]) -> list[str]:
    """What a reader would otherwise miss: a configured protocol left with no valid item (loud, first), then
    data that is probably wrong (the items were kept)."""
    lost, data = counts.get("protocols_without_items") or [], meta.get("warnings") or []
    dead = [b for b in meta.get("benchmarks") or [] if b.get("requests_in") and
            b.get("requests_errored") == b["requests_in"]]
    lost = lost + [f"benchmark {b['protocol']} · {b['dataset']}: every one of its {b['requests_in']} requests "
                   f"errored ({', '.join(f'{r} ×{n}' for r, n in b.get('top_reasons') or [])})" for b in dead]
    if not lost and not data:
        return []
    out = ["", "## Warnings", ""]
    out += [f"* ⚠ **{w}**: its results are missing from this report; see the errors below." for w in lost]
    if data:
        out += [""] * bool(lost) + ["Data that is probably wrong (the items were kept):", ""]
        out += [f"* {w}" for w in data]
    return out


def _results(summary: pd.DataFrame, conf: int) -> list[str]:
    out: list[str] = []
    vals = summary[(summary["kind"] == "value") & (summary["group"] == "all")
                   & ~summary["protocol_kind"].isin(kinds_where("text_metrics"))]
    for (proto, ds), df in vals.groupby(["protocol", "dataset"], sort=True):
        metrics = list(dict.fromkeys(df["metric"]))
        kind = df["protocol_kind"].iloc[0]
        out += ["", f"## {proto} · {ds}" + (f" ({kind})" if kind != proto else ""), "",
                f"Value [{conf} % CI] over n items (the items with a scored request). Metrics are over the scored "
                f"requests of a cell; `{ERRORED}` counts its errored requests (left out), which metrics named "
                "`…_with_errors` count as answers that name nothing (MCQ: wrong; factual: no label)."
                + _ci_unit_sentence(df) + _strict_sentence(df)]
        rows = []
        differ = readings.pairs(df)
        for (model, variant, cond), g in df.groupby(["model", "variant", "condition"], sort=False):
            cells = {r.metric: _fmt(r.value, r.ci_low, r.ci_high) for r in g.itertuples()}
            cells[ERRORED] = str(int(g[g["metric"] == ERRORED]["value"].sum()))
            if (proto, ds, model, variant, cond) in differ:  # a count, linked to those items in the browser
                cells[VERDICTS_DIFFER] = readings.differ_cell(differ[(proto, ds, model, variant, cond)])
            scored_n = g[(g["metric"] != ERRORED) & ~g["metric"].str.endswith("_with_errors")]["n"]
            rows.append([model, variant, cond, int(scored_n.max()) if len(scored_n) else 0]
                        + [cells.get(m, "") for m in metrics])
        out += ["", _md_table(["model", "variant", "condition", "n", *metrics], rows)]
    return out


def _freeform(summary: pd.DataFrame, conf: int, models: dict[str, Any], min_items: int) -> list[str]:
    """Free-form results as the paper's Table 2 (the rewrite systems known from the models' recorded info)."""
    if not summary["protocol_kind"].isin(kinds_where("text_metrics")).any():
        return []
    return freeform_report.run_sections(summary, conf, rewrite_roles(models), REWRITE_LABEL, min_items)


def rewrite_models(meta: dict[str, Any]) -> list[str]:
    """The run's reference-rewrite systems (not audio models: no listening verdict), from their recorded info."""
    if not meta.get("models"):
        return []
    return list(rewrite_roles(meta["models"]))


def _listening(summary: pd.DataFrame, conf: int, min_items: int = verdict.MIN_ITEMS) -> list[str]:
    diffs = summary[(summary["kind"] == "paired_diff") & (summary["group"] == "all")
                    & summary["metric"].isin(HEADLINE) & summary["condition"].astype(str).str.startswith("correct-")]
    if diffs.empty:
        return []
    out = ["", "## Does the model listen? Every paired difference", "",
           f"Paired difference correct − condition over the same items, with its {conf} % CI; "
           "a model that uses the audio scores clearly higher with the correct audio (CI above 0). n = items scored "
           f"in both conditions; under {min_items} items a CI decides nothing (too few items), and a zero-width "
           "interval is flagged (degenerate at 0, else all items differ by the same amount). The CI resamples "
           "clips (every question of a clip together) where questions share one, else items (CI over); accuracy "
           "with one answer per item also gets McNemar's exact test, Holm-adjusted over the run's tests."]
    rows = []
    for r in diffs.itertuples():
        rows.append([r.protocol, r.dataset, r.model, r.variant, r.condition, r.metric,
                     _fmt(r.value, r.ci_low, r.ci_high), r.n, verdict.ci_over(r), verdict.paired_test_label(r),
                     verdict.interval_label(r.value, r.ci_low, r.ci_high, r.n, min_items),
                     f"[listen]({difference_href(r.protocol, r.dataset, r.model, r.variant, r.condition)})"])
    out += ["", _md_table(["protocol", "dataset", "model", "variant", "contrast", "metric", "difference", "n",
                           "CI over", "test", "verdict", "items"], rows)]
    return out


#: the Errors table shows a reason up to this many characters (a longer one is cut, with a visible mark)
REASON_SHOWN = 120


def _errors(errors: pd.DataFrame) -> list[str]:
    out = ["", "## Errors", ""]
    if errors.empty:
        return out + ["None."]
    whole = errors["error"].astype(str).str.replace(r"\s+", " ", regex=True).str.strip()
    reason = whole.where(whole.str.len() <= REASON_SHOWN, whole.str.slice(0, REASON_SHOWN - 1).str.rstrip() + " …")
    cls = errors["error_class"] if "error_class" in errors.columns else pd.Series("", index=errors.index)
    agg = (errors.assign(reason=reason, error_class=cls.fillna(""))
           .groupby(["table", "error_stage", "error_class", "reason"], dropna=False)
           .size().reset_index(name="count").sort_values("count", ascending=False))
    out.append(_md_table(["table", "stage", "class", "reason", "count"],
                         [[r.table, r.error_stage, r.error_class, r.reason.replace("|", "\\|"), r.count]
                          for r in agg.itertuples()]))
    if (whole.str.len() > REASON_SHOWN).any():
        out += ["", f"A reason longer than {REASON_SHOWN} characters is cut here and ends in “…”; "
                    "`tables/errors.parquet` holds every error row with its whole reason."]
    return out


def _strict_sentence(df: pd.DataFrame) -> str:
    """What a section's ``accuracy_strict`` and ``verdicts_differ`` are, when it has them."""
    if VERDICTS_DIFFER not in set(df["metric"]):
        return ""
    return (" Its judge follows a published rule: `accuracy` is that rule's verdict, `accuracy_strict` evalcore's "
            f"strict reading, and `{VERDICTS_DIFFER}` counts the items they judge differently (linked to them).")


def _ci_unit_sentence(df: pd.DataFrame) -> str:
    """What a section's CIs resample, when it is not items: clips (several questions share one) or recordings."""
    if "ci_unit" not in df.columns:
        return ""
    units = sorted({u for u in df["ci_unit"].dropna() if u and u != "item"})
    if not units:
        return ""
    clusters = df.loc[df["ci_unit"].isin(units), "clusters"].dropna()
    span = f" ({int(clusters.min())}–{int(clusters.max())} per cell)" if len(clusters) else ""
    return (f" Its CIs resample {' and '.join(u + 's' for u in units)}{span}, every question of one together, "
            "since questions share them.")
