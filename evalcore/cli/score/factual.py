"""``evalcore score factual``: extract labels from free-text answers and score P/R/F1 against ground truth.

INPUT rows carry ``response`` (the model's text) and ``labels`` (ground-truth strings); every other
scalar column is a grouping column by default (``item_id``, when present, is instead the bootstrap
unit). Labels are extracted with the deterministic lexicon extractor (default) or the
``llm_extractor`` judge (``--extractor llm``) against the task's closed vocabulary
(:mod:`evalcore.vocab`; the lexicon's labels, or ``--vocab``), ground-truth labels are
normalised to the same canonical forms, and FMA genre tasks compare them under a hierarchy mode
(:mod:`evalcore.scorers.factual_modes`): ``genre`` → top, ``genre-tree`` → same-tree,
``genre-node`` → same-node; instruments and composers are compared exactly.

With ``--extractor llm`` the LLM's out-of-vocabulary terms are dropped (never scored) and counted
(per-item ``dropped``, total in ``report.md``); a row whose API call fails gets that failure as its
``error`` (counted, excluded from the metrics). ``--agreement`` then also runs the lexicon extractor
on the same responses and writes ``agreement.parquet`` (both label lists, exact set match, Jaccard;
two empty lists agree with Jaccard 1) and a summary line: share of exact matches, mean Jaccard and
the micro F1 of the LLM labels against the lexicon labels (pooled over rows; undefined when neither
extractor found any label).

``--format true_false`` / ``--format binary_choice`` score the derived formats with the pipeline's
readers (the ``true_false`` / ``binary_choice`` judges, lexicon of ``--task``, labels in canonical
forms) and scorers (:mod:`evalcore.scorers.factual_formats`). Rows: ``response`` + ``label`` (asked)
+ ``truth`` (bool), or ``response`` + ``options`` (two, in presented order) + ``correct_index``
(0/1). Rows sharing grouping values, ``item_id`` (the recording; without the column each row is its
own question) and, for true/false, the label are one question's chunks (``chunk_index``), combined
by any/majority (true/false) or majority (binary choice; the labels named are united over chunks and
scored by P/R/F1 against the correct option, as the paper reports binary choice). ``per_item.parquet``
has one row per input row: the chunk's reading (``answer`` yes/no/null, or ``parsed_index`` -1 =
unanswered and ``named``) and the question's ``answer_<rule>``/``correct_<rule>`` or
``choice``/``correct``/``tp``/``fp``/``fn``; ``summary.parquet`` the
pipeline's metric names per ``group`` (``all``, for true/false also ``label=<label>``), bootstrap
units = ``item_id``. Chunks that repeat a ``chunk_index`` or disagree on the question are error rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pandas as pd
import typer

from evalcore.reports.tables_html import fmt
from evalcore.cli.score.app import score_app
from evalcore.cli.score.factual_formats import FORMATS, run_derived
from evalcore.cli.score.factual_rows import label_list, render_report, response_error
from evalcore.cli.score.io import arrow_safe, fail, is_missing, quiet_mode, write_outputs
from evalcore.cli.score.llm_options import LLM, LlmOptions
from evalcore.cli.score.option_groups import COMMON, OUT, Common, group_by_option, input_argument, takes_groups
from evalcore.cli.score.stage import score_judged, scorer
from evalcore.cli.score.steps import (Counts, bootstrap_unit, close, group_columns, judge_answers, read_input,
                                      scored_rows, summary_of, write_tables)
from evalcore.scorers import factual_agreement as _agreement
from evalcore.scorers.factual_modes import Mode, apply_mode, per_label
from evalcore.vocab import (LEXICONS, TASKS, Lexicon, extract, lexicon_name, normalize, read_genre_tree,
                            read_vocab_file, restrict, vocabulary)

MODE_OF_TASK: dict[str, Mode] = {"genre": "top", "genre-tree": "same-tree", "genre-node": "same-node",
                                 "instrument": "same-node", "composer": "same-node"}
METRIC_COLUMNS = ["tp", "fp", "fn", "precision", "recall", "f1"]
_RESERVED = {"response", "labels", "_input_error"}


def read_tree(path: Path, task: str) -> dict[str, str]:
    """Genre tree {genre: top-level genre}, canonical forms, from FMA ``genres.csv`` or a JSON object
    (:func:`evalcore.vocab.files.read_genre_tree`; genre canonical forms do not depend on the task)."""
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


def row_error(row: dict[str, Any]) -> str | None:
    """Why a row cannot be scored, or None."""
    err = response_error(row)
    if err is not None:
        return err
    labels = row.get("labels")
    if is_missing(labels):
        return "labels missing"
    if label_list(labels) is None:
        return "labels is not a list of strings"
    return None


def llm_extract(df: pd.DataFrame, judge: Any) -> list[dict | None]:
    """The LLM judge's result per row (None for rows that are invalid anyway); one batched judge call."""
    rows = df.to_dict("records")
    todo = [i for i, row in enumerate(rows) if row_error(row) is None]
    results = judge_answers("llm extractor", judge, [rows[i]["response"] for i in todo], [None] * len(todo))
    out: list[dict | None] = [None] * len(rows)
    for i, r in zip(todo, results):
        out[i] = r
    return out


def score_rows(df: pd.DataFrame, task: str, lexicon: Lexicon, tree: dict[str, str],
               llm: list[dict | None] | None = None) -> pd.DataFrame:
    """Input rows + ``truth``, ``extracted``, TP/FP/FN, P/R/F1 and ``error`` (metrics NaN on errors).

    Each valid row is one request: its extracted labels and normalised ground truth, under the task's hierarchy
    mode, become a judged row that the scoring stage scores (:func:`evalcore.cli.score.stage.score_judged`, the
    registered factual scorer, as in a run). ``llm`` (one judge result per row, from :func:`llm_extract`)
    replaces the lexicon extractor and adds the ``dropped`` column; a judge error becomes the row's ``error``.
    """
    mode = MODE_OF_TASK[task]
    out, judged = [], []
    for i, row in enumerate(df.to_dict("records")):
        err = row_error(row)
        result = llm[i] if llm is not None else None
        if err is None and result is not None and result.get("error") is not None:
            err = f"llm extractor: {result['error']}"
        rec: dict[str, Any] = {k: v for k, v in row.items() if k != "_input_error"}
        if err is not None:
            if not isinstance(rec.get("response"), str):
                rec["response"] = None
            rec["labels"] = label_list(rec.get("labels"))
            rec.update(truth=None, extracted=None, **{c: float("nan") for c in METRIC_COLUMNS}, error=err)
            if llm is not None:
                rec["dropped"] = None
        else:
            labels = label_list(row["labels"]) or []
            truth = list(dict.fromkeys(normalize(x, task) for x in labels))
            extracted = list(result["extracted"]) if result is not None else extract(row["response"], lexicon)
            pred, gold = apply_mode(extracted, truth, tree, mode)
            rec.update(labels=labels, truth=truth, extracted=extracted, **{c: float("nan") for c in METRIC_COLUMNS},
                       error=None)
            if llm is not None:
                rec["dropped"] = int(result.get("dropped", 0)) if result is not None else 0
            rec["_pred"], rec["_gold"] = pred, gold
            judged.append({"request_id": str(i), "extracted": pred, "labels": gold})
        out.append(rec)
    stage = score_judged(judged, "factual")
    for i, rec in enumerate(out):
        if str(i) in stage.errors:
            rec["error"] = stage.errors[str(i)]
        elif str(i) in stage.metrics:
            rec.update({c: float(stage.metrics[str(i)][c]) for c in METRIC_COLUMNS})
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


@score_app.command("factual")
@takes_groups
def factual(
    input_uri: str = input_argument("with `response` and `labels` (other columns with --format, see there)."),
    out: str = OUT,
    task: str = typer.Option(..., "--task", help="genre | genre-tree | genre-node | instrument | composer"),
    answer_format: str = typer.Option("standard", "--format", help="standard (labels extracted from free text) | "
                                      "true_false (rows: response, label, truth) | binary_choice (rows: "
                                      "response, options, correct_index)."),
    extractor: str = typer.Option("lexicon", "--extractor", help="lexicon (offline, deterministic) | llm"),
    vocab: Optional[Path] = typer.Option(None, "--vocab", help="JSON or text vocabulary replacing the task's."),
    tree: Optional[Path] = typer.Option(None, "--tree", help="FMA genres.csv or JSON {genre: top-level} "
                                        "for the genre tasks."),
    group_by: Optional[str] = group_by_option("response/labels"),
    common: Common = COMMON,
    llm: LlmOptions = LLM,
    agreement: bool = typer.Option(False, "--agreement", help="With --extractor llm: also run the lexicon "
                                   "extractor and write agreement.parquet and an agreement line in report.md."),
) -> None:
    """Extract labels from each response and score precision/recall/F1 against its ground-truth labels."""
    quiet_mode(common.quiet)
    _check_options(task, extractor, agreement, answer_format, vocab, tree)
    if answer_format != "standard":
        return run_derived(input_uri, out, task, answer_format, group_by, seed=common.seed,
                           resamples=common.resamples, quiet=common.quiet)
    genre_tree, lexicon = _task_lexicon(task, vocab, tree)
    df = read_input("factual", input_uri, ["response", "labels"])
    if task == "genre-tree" and not genre_tree:
        typer.echo("note: no --tree given; same-tree credit then only applies to identical top-level genres",
                   err=True)
    groups = group_columns("factual", df, group_by, _RESERVED)
    llm_results = None
    if extractor == "llm":
        llm_results = llm_extract(df, llm.judge("factual", "--extractor llm", "llm_extractor",
                                                vocabulary=list(lexicon.labels),
                                                category=lexicon_name(task).rsplit("_", 1)[-1]))
    per_item = score_rows(df, task, lexicon, genre_tree, llm_results)
    _write_standard(out, per_item, groups, task=task, extractor=extractor, lexicon=lexicon, agreement=agreement,
                    common=common)


def _check_options(task: str, extractor: str, agreement: bool, answer_format: str, vocab: Optional[Path],
                   tree: Optional[Path]) -> None:
    """``--task``, ``--extractor`` and ``--format`` name what there is and go together, or the command exits 2."""
    if task not in TASKS:
        fail("factual", f"unknown --task {task!r}; choose one of {', '.join(TASKS)}")
    if extractor not in ("lexicon", "llm"):
        fail("factual", f"unknown --extractor {extractor!r}; choose lexicon or llm")
    if extractor != "llm" and agreement:
        fail("factual", "--agreement compares the LLM extractor with the lexicon extractor; use --extractor llm")
    if answer_format not in FORMATS:
        fail("factual", f"unknown --format {answer_format!r}; choose one of {', '.join(FORMATS)}")
    if answer_format != "standard" and (extractor != "lexicon" or vocab is not None or tree is not None):
        fail("factual", f"--format {answer_format} reads answers with its own judge; --extractor llm, --vocab "
                        "and --tree apply to --format standard only")


def _task_lexicon(task: str, vocab: Optional[Path], tree: Optional[Path]) -> tuple[dict[str, str], Lexicon]:
    """(the ``--tree`` genre tree, or none; the task's lexicon); an unreadable file exits 2."""
    try:
        genre_tree = read_tree(tree, task) if tree is not None else {}
        return genre_tree, build_lexicon(task, vocab, genre_tree)
    except (ValueError, OSError) as e:
        fail("factual", str(e))


def _write_standard(out: str, per_item: pd.DataFrame, groups: list[str], *, task: str, extractor: str,
                    lexicon: Lexicon, agreement: bool, common: Common) -> None:
    """The summary, per-label table, agreement (``--agreement``) and report of scored rows, written with the
    command's notes and closing lines."""
    scored = scored_rows(per_item)
    summary = summary_of(scored, scorer("factual").aggregates, groups, unit=bootstrap_unit(scored, groups),
                         resamples=common.resamples, seed=common.seed)
    labels_table = per_label_table(scored if len(scored) else pd.DataFrame(columns=[*groups, "_pred", "_gold"]),
                                   groups)
    counts = Counts.of(per_item["error"])
    dropped = (int(scored["dropped"].sum()) if len(scored) else 0) if extractor == "llm" else None
    agree_table = agreement_table(scored, lexicon, groups) if agreement else None
    agree = agreement_summary(agree_table) if agree_table is not None else None
    report = render_report(task, extractor, counts, summary, groups, labels_table, dropped, agree)
    per_item = arrow_safe(per_item.drop(columns=["_pred", "_gold"], errors="ignore"), int_columns=["dropped"])
    write_outputs(out, per_item, summary, report)
    extra = {"per_label.parquet": labels_table}
    if agree_table is not None:
        extra["agreement.parquet"] = arrow_safe(agree_table)
    write_tables(out, extra)
    vocab = set(lexicon.labels)
    _notes(agree, dropped, outside=sum(t not in vocab for ts in scored["truth"] for t in ts) if len(scored) else 0)
    close("factual", counts, per_item["error"], quiet=common.quiet, out=out,
          wrote=("per_item.parquet", "summary.parquet", "per_label.parquet", "report.md", *list(extra)[1:]))


def _notes(agree: dict[str, float] | None, dropped: int | None, outside: int) -> None:
    """The notes said even with ``--quiet``: the agreement line, LLM labels dropped, truths outside the vocabulary."""
    if agree is not None:
        typer.echo(f"agreement llm vs lexicon: exact {fmt(agree['exact'])}, mean Jaccard {fmt(agree['jaccard'])}, "
                   f"micro F1 {fmt(agree['f1'])}", err=True)
    if dropped:
        typer.echo(f"note: {dropped} out-of-vocabulary label(s) dropped by the LLM extractor", err=True)
    if outside:
        typer.echo(f"note: {outside} ground-truth label(s) outside the vocabulary (they can only be misses)",
                   err=True)
