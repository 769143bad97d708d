"""``evalcore score factual``: extract labels from free-text answers and score P/R/F1 against ground truth.

INPUT rows carry ``response`` (the model's text) and ``labels`` (ground-truth strings); every other
scalar column is a grouping column by default (``item_id``, when present, is instead the bootstrap
unit). Labels are extracted with the deterministic lexicon extractor (default) or the
``llm_extractor`` judge (``--extractor llm``) against the task's closed vocabulary
(:mod:`evalcore.judges.vocab`; the lexicon's labels, or ``--vocab``), ground-truth labels are
normalised to the same canonical forms, and FMA genre tasks compare them under a hierarchy mode
(:mod:`evalcore.metrics.factual_modes`): ``genre`` → top, ``genre-tree`` → same-tree,
``genre-node`` → same-node; instruments and composers are compared exactly.

With ``--extractor llm`` the LLM's out-of-vocabulary terms are dropped (never scored) and counted
(per-item ``dropped``, total in ``report.md``); a row whose API call fails gets that failure as its
``error`` (counted, excluded from the metrics). ``--agreement`` then also runs the lexicon extractor
on the same responses and writes ``agreement.parquet`` (both label lists, exact set match, Jaccard;
two empty lists agree with Jaccard 1) and a summary line: share of exact matches, mean Jaccard and
the micro F1 of the LLM labels against the lexicon labels (pooled over rows; undefined when neither
extractor found any label).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import typer

from evalcore import storage
from evalcore.judges.lexicon import LEXICONS, Lexicon, extract
from evalcore.judges.vocab import (TASKS, lexicon_name, normalize, read_genre_tree, read_vocab_file, restrict,
                                   vocabulary)
from evalcore.metrics import factual_agreement as _agreement
from evalcore.metrics.factual import FactualScorer, set_scores
from evalcore.metrics.factual_modes import Mode, apply_mode, per_label
from evalcore.scoring import llm_options as llm
from evalcore.scoring.cli import score_app
from evalcore.scoring.io import (InputError, arrow_safe, default_group_by, fail, fmt, is_missing, read_rows, summarize,
                                 write_outputs)

MODE_OF_TASK: dict[str, Mode] = {"genre": "top", "genre-tree": "same-tree", "genre-node": "same-node",
                                 "instrument": "same-node", "composer": "same-node"}
METRIC_COLUMNS = ["tp", "fp", "fn", "precision", "recall", "f1"]
_RESERVED = {"response", "labels", "_input_error"}


def read_tree(path: Path, task: str) -> dict[str, str]:
    """Genre tree {genre: top-level genre}, canonical forms, from FMA ``genres.csv`` or a JSON object
    (:func:`evalcore.judges.vocab.read_genre_tree`; genre canonical forms do not depend on the task)."""
    return read_genre_tree(path)


def build_lexicon(task: str, vocab_file: Optional[Path], tree: dict[str, str]) -> Lexicon:
    """The task's lexicon; ``--vocab`` replaces its vocabulary, a genre tree adds its genres."""
    base = LEXICONS[lexicon_name(task)]
    if vocab_file is not None:
        entries = read_vocab_file(vocab_file)
        return restrict(base, list(entries), entries, name=f"{base.name}+vocab")
    if tree and task in ("genre-tree", "genre-node"):
        labels = list(dict.fromkeys([*vocabulary(task), *tree, *tree.values()]))
        return restrict(base, labels, name=f"{base.name}+tree")
    return base


def _label_list(value: Any) -> list[str] | None:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
        return list(value)
    return None


def row_error(row: dict[str, Any]) -> str | None:
    """Why a row cannot be scored, or None."""
    if isinstance(row.get("_input_error"), str):
        return row["_input_error"]
    response, labels = row.get("response"), row.get("labels")
    if is_missing(response):
        return "response missing"
    if not isinstance(response, str):
        return f"response is not a string ({type(response).__name__})"
    if is_missing(labels):
        return "labels missing"
    if _label_list(labels) is None:
        return "labels is not a list of strings"
    return None


def llm_extract(df: pd.DataFrame, judge: Any) -> list[dict | None]:
    """The LLM judge's result per row (None for rows that are invalid anyway); one batched judge call."""
    rows = df.to_dict("records")
    todo = [i for i, row in enumerate(rows) if row_error(row) is None]
    results = judge.judge([rows[i]["response"] for i in todo], [None] * len(todo)) if todo else []
    out: list[dict | None] = [None] * len(rows)
    for i, r in zip(todo, results):
        out[i] = r
    return out


def score_rows(df: pd.DataFrame, task: str, lexicon: Lexicon, tree: dict[str, str],
               llm: list[dict | None] | None = None) -> pd.DataFrame:
    """Input rows + ``truth``, ``extracted``, TP/FP/FN, P/R/F1 and ``error`` (metrics NaN on errors).

    ``llm`` (one judge result per row, from :func:`llm_extract`) replaces the lexicon extractor and
    adds the ``dropped`` column; a judge error becomes the row's ``error``.
    """
    mode = MODE_OF_TASK[task]
    out = []
    for i, row in enumerate(df.to_dict("records")):
        err = row_error(row)
        result = llm[i] if llm is not None else None
        if err is None and result is not None and result.get("error") is not None:
            err = f"llm extractor: {result['error']}"
        rec: dict[str, Any] = {k: v for k, v in row.items() if k != "_input_error"}
        if err is not None:
            if not isinstance(rec.get("response"), str):
                rec["response"] = None
            rec["labels"] = _label_list(rec.get("labels"))
            rec.update(truth=None, extracted=None, **{c: float("nan") for c in METRIC_COLUMNS}, error=err)
            if llm is not None:
                rec["dropped"] = None
        else:
            labels = _label_list(row["labels"]) or []
            truth = list(dict.fromkeys(normalize(x, task) for x in labels))
            extracted = list(result["extracted"]) if result is not None else extract(row["response"], lexicon)
            pred, gold = apply_mode(extracted, truth, tree, mode)
            rec.update(labels=labels, truth=truth, extracted=extracted, **set_scores(pred, gold), error=None)
            if llm is not None:
                rec["dropped"] = int(result.get("dropped", 0)) if result is not None else 0
            rec["_pred"], rec["_gold"] = pred, gold
        out.append(rec)
    return pd.DataFrame(out)


def per_label_table(scored: pd.DataFrame, group_cols: list[str]) -> pd.DataFrame:
    """Per-label P/R/F1 per group (over the mode-adjusted label sets that were scored)."""
    cols = [*group_cols, "label", "support", "tp", "fp", "fn", "precision", "recall", "f1"]
    rows = []
    groups = scored.groupby(group_cols, sort=True, dropna=False) if group_cols else [((), scored)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        for lab, m in per_label(zip(g["_pred"], g["_gold"])).items():
            rows.append({**dict(zip(group_cols, key)), "label": lab, **m})
    return pd.DataFrame(rows, columns=cols)


def agreement_table(scored: pd.DataFrame, lexicon: Lexicon, group_cols: list[str]) -> pd.DataFrame:
    """Per scored row: LLM and lexicon labels on the same response, exact set match and Jaccard."""
    keep = [c for c in ("item_id", *group_cols) if c in scored.columns]
    keep = list(dict.fromkeys(keep))
    rows = []
    for row in scored.to_dict("records"):
        llm_labels = list(row["extracted"])
        lex_labels = extract(row["response"], lexicon)
        cmp = _agreement.compare(llm_labels, lex_labels)
        rows.append({**{c: row[c] for c in keep}, "response": row["response"], "llm_labels": llm_labels,
                     "lexicon_labels": lex_labels, "exact_match": bool(cmp["exact"]), "jaccard": cmp["jaccard"]})
    return pd.DataFrame(rows, columns=[*keep, "response", "llm_labels", "lexicon_labels", "exact_match", "jaccard"])


def agreement_summary(table: pd.DataFrame) -> dict[str, float]:
    """n, share of exact matches, mean Jaccard, micro P/R/F1 of the LLM labels vs the lexicon labels."""
    return _agreement.summarize(zip(table["llm_labels"], table["lexicon_labels"]))


def render_report(task: str, extractor: str, counts: dict[str, int], summary: pd.DataFrame,
                  group_cols: list[str], labels: pd.DataFrame, dropped: int | None = None,
                  agreement: dict[str, float] | None = None) -> str:
    """A short Markdown report: counts, the summary table and the per-label table."""
    lines = [f"# Factual QA — task `{task}`, extractor `{extractor}`", "",
             f"rows: {counts['in']} in = {counts['scored']} scored + {counts['errored']} errored", ""]
    if dropped is not None:
        lines += [f"out-of-vocabulary labels dropped by the LLM extractor (not scored): {dropped}", ""]
    if agreement is not None:
        lines += [f"agreement llm vs lexicon on {agreement['n']} rows: exact match {fmt(agreement['exact'])}, "
                  f"mean Jaccard {fmt(agreement['jaccard'])}, micro F1 {fmt(agreement['f1'])} "
                  f"(P {fmt(agreement['precision'])}, R {fmt(agreement['recall'])}; lexicon as reference)", ""]
    lines += [f"| {' | '.join([*group_cols, 'metric', 'value', '95% CI', 'n'])} |",
              "|" + "---|" * (len(group_cols) + 4)]
    for r in summary.to_dict("records"):
        cells = [str(r[c]) for c in group_cols]
        ci = f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]"
        lines.append(f"| {' | '.join([*cells, r['metric'], fmt(r['value']), ci, str(r['n'])])} |")
    if not labels.empty:
        lines += ["", "Per label:", "", f"| {' | '.join([*group_cols, 'label', 'support', 'P', 'R', 'F1'])} |",
                  "|" + "---|" * (len(group_cols) + 5)]
        for r in labels.to_dict("records"):
            cells = [str(r[c]) for c in group_cols] + [r["label"], str(int(r["support"]))]
            lines.append(f"| {' | '.join([*cells, fmt(r['precision']), fmt(r['recall']), fmt(r['f1'])])} |")
    return "\n".join(lines) + "\n"


@score_app.command("factual")
def factual(
    input_uri: str = typer.Argument(..., metavar="INPUT", help="Parquet or JSONL with `response` and `labels`."),
    out: str = typer.Option(..., "--out", help="Output directory (local path or s3://)."),
    task: str = typer.Option(..., "--task", help="genre | genre-tree | genre-node | instrument | composer"),
    extractor: str = typer.Option("lexicon", "--extractor", help="lexicon (offline, deterministic) | llm"),
    vocab: Optional[Path] = typer.Option(None, "--vocab", help="JSON or text vocabulary replacing the task's."),
    tree: Optional[Path] = typer.Option(None, "--tree", help="FMA genres.csv or JSON {genre: top-level} "
                                        "for the genre tasks."),
    group_by: Optional[str] = typer.Option(None, "--group-by", help="Comma-separated grouping columns "
                                           "(default: every scalar column but response/labels/item_id)."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    resamples: int = typer.Option(1000, "--resamples", help="Bootstrap resamples."),
    llm_base_url: Optional[str] = llm.BASE_URL,
    llm_model: Optional[str] = llm.MODEL,
    llm_key_env: str = llm.KEY_ENV,
    llm_cache: Optional[str] = llm.CACHE,
    llm_rpm: int = llm.RPM,
    llm_tpm: int = llm.TPM,
    llm_max_retries: int = llm.MAX_RETRIES,
    llm_timeout: float = llm.TIMEOUT,
    agreement: bool = typer.Option(False, "--agreement", help="With --extractor llm: also run the lexicon "
                                   "extractor and write agreement.parquet and an agreement line in report.md."),
) -> None:
    """Extract labels from each response and score precision/recall/F1 against its ground-truth labels."""
    if task not in TASKS:
        fail("factual", f"unknown --task {task!r}; choose one of {', '.join(TASKS)}")
    if extractor not in ("lexicon", "llm"):
        fail("factual", f"unknown --extractor {extractor!r}; choose lexicon or llm")
    if extractor != "llm" and agreement:
        fail("factual", "--agreement compares the LLM extractor with the lexicon extractor; use --extractor llm")
    try:
        genre_tree = read_tree(tree, task) if tree is not None else {}
        lexicon = build_lexicon(task, vocab, genre_tree)
        df = read_rows(input_uri, ["response", "labels"])
    except (InputError, ValueError, OSError) as e:
        fail("factual", str(e))
    if task == "genre-tree" and not genre_tree:
        typer.echo("note: no --tree given; same-tree credit then only applies to identical top-level genres",
                   err=True)
    if group_by is None:
        groups = default_group_by(df, _RESERVED | {"item_id"})
    else:
        groups = [c.strip() for c in group_by.split(",") if c.strip()]
    unknown = [c for c in groups if c not in df.columns or c in _RESERVED]
    if unknown:
        fail("factual", f"--group-by: no such grouping column(s) {unknown}; columns: {list(df.columns)}")

    llm_results = None
    if extractor == "llm":
        judge = llm.build_judge("factual", "--extractor llm", "llm_extractor", base_url=llm_base_url,
                                model=llm_model, key_env=llm_key_env, cache=llm_cache, rpm=llm_rpm, tpm=llm_tpm,
                                max_retries=llm_max_retries, timeout_s=llm_timeout,
                                vocabulary=list(lexicon.labels), category=lexicon_name(task).rsplit("_", 1)[-1])
        llm_results = llm_extract(df, judge)
    per_item = score_rows(df, task, lexicon, genre_tree, llm_results)
    ok = per_item["error"].isna()
    scored = per_item[ok].copy()
    unit = "item_id" if "item_id" in scored.columns and "item_id" not in groups else "_row"
    scored["_row"] = np.arange(len(scored))
    summary = summarize(scored, FactualScorer.aggregates, groups, unit=unit, resamples=resamples, seed=seed) \
        if len(scored) else pd.DataFrame(columns=[*groups, "kind", "metric", "value", "ci_low", "ci_high", "n",
                                                  "definition"])
    labels_table = per_label_table(scored if len(scored) else pd.DataFrame(columns=[*groups, "_pred", "_gold"]),
                                   groups)
    counts = {"in": len(per_item), "scored": int(ok.sum()), "errored": int((~ok).sum())}
    dropped = int(scored["dropped"].sum()) if extractor == "llm" and len(scored) else (0 if extractor == "llm"
                                                                                        else None)
    agree_table = agree = None
    if agreement:
        agree_table = agreement_table(scored, lexicon, groups)
        agree = agreement_summary(agree_table)
    report = render_report(task, extractor, counts, summary, groups, labels_table, dropped, agree)
    per_item = arrow_safe(per_item.drop(columns=["_pred", "_gold"], errors="ignore"), int_columns=["dropped"])
    write_outputs(out, per_item, summary, report)
    storage.write_parquet(pa.Table.from_pandas(labels_table, preserve_index=False),
                          storage.join(out, "per_label.parquet"))
    written = "per_item.parquet, summary.parquet, per_label.parquet, report.md"
    if agree_table is not None:
        storage.write_parquet(pa.Table.from_pandas(arrow_safe(agree_table), preserve_index=False),
                              storage.join(out, "agreement.parquet"))
        written += ", agreement.parquet"
        typer.echo(f"agreement llm vs lexicon: exact {fmt(agree['exact'])}, mean Jaccard {fmt(agree['jaccard'])}, "
                   f"micro F1 {fmt(agree['f1'])}", err=True)
    if dropped:
        typer.echo(f"note: {dropped} out-of-vocabulary label(s) dropped by the LLM extractor", err=True)

    vocab_set = set(lexicon.labels)
    outside = sum(t not in vocab_set for ts in scored["truth"] for t in ts) if len(scored) else 0
    if outside:
        typer.echo(f"note: {outside} ground-truth label(s) outside the vocabulary (they can only be misses)",
                   err=True)
    typer.echo(f"rows: {counts['in']} in = {counts['scored']} scored + {counts['errored']} errored", err=True)
    typer.echo(f"wrote {out}/{written}", err=True)
    if not counts["scored"]:
        fail("factual", "no row could be scored", code=1)
