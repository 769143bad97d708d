"""``evalcore score factual``: extract labels from free-text answers and score P/R/F1 against ground truth.

INPUT rows carry ``response`` (the model's text) and ``labels`` (ground-truth strings); every other
scalar column is a grouping column by default (``item_id``, when present, is instead the bootstrap
unit). Labels are extracted with the deterministic lexicon extractor (default) or the
``llm_extractor`` judge (``--extractor llm``) against the task's closed vocabulary
(:mod:`evalcore.vocab`; the lexicon's labels, or ``--vocab``), ground-truth labels are
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

``--format true_false`` / ``--format binary_choice`` score the derived formats with the pipeline's
readers (the ``true_false`` / ``binary_choice`` judges, lexicon of ``--task``, labels in canonical
forms) and scorers (:mod:`evalcore.metrics.factual_formats`). Rows: ``response`` + ``label`` (asked)
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

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Hashable, Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import typer

from evalcore import storage
from evalcore.judges.yes_no import BinaryChoiceJudge, TrueFalseJudge
from evalcore.metrics import factual_agreement as _agreement
from evalcore.metrics.base import Scorer
from evalcore.metrics.factual import FactualScorer, set_scores
from evalcore.metrics.factual_formats import BinaryChoiceScorer, TrueFalseScorer, chunk_answers
from evalcore.metrics.factual_modes import Mode, apply_mode, per_label
from evalcore.metrics.aggregate import aggregate
from evalcore.scoring import llm_options as llm
from evalcore.scoring.cli import score_app
from evalcore.scoring.io import RESAMPLES_OPTION, SEED_OPTION
from evalcore.reports.tables_html import fmt
from evalcore.scoring.io import (SUMMARY_TAIL, InputError, arrow_safe, default_group_by, exit_if_unscored, fail,
                                 is_missing, read_rows, summarize, write_outputs)
from evalcore.scoring.mcq import _index as index_value
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


def _label_list(value: Any) -> list[str] | None:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
        return list(value)
    return None


def _response_error(row: dict[str, Any]) -> str | None:
    """Why a row's input line or ``response`` cannot be scored, or None."""
    if isinstance(row.get("_input_error"), str):
        return row["_input_error"]
    response = row.get("response")
    if is_missing(response):
        return "response missing"
    if not isinstance(response, str):
        return f"response is not a string ({type(response).__name__})"
    return None


def row_error(row: dict[str, Any]) -> str | None:
    """Why a row cannot be scored, or None."""
    err = _response_error(row)
    if err is not None:
        return err
    labels = row.get("labels")
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


# --------------------------------------------------------------------------- derived formats

FORMATS = ("standard", "true_false", "binary_choice")
_ANSWER = {True: "yes", False: "no", None: None}


def _shown(v: Any) -> Any:
    """An index as an error message shows it: integral floats (from columns with nulls) as ints."""
    index = index_value(v)
    return v if index is None else index


def _chunk_error(row: dict[str, Any]) -> str | None:
    """Why a row's ``item_id``/``chunk_index`` cannot place it in a question, or None."""
    if "item_id" in row and is_missing(row["item_id"]):
        return "item_id missing"
    chunk = row.get("chunk_index")
    if not is_missing(chunk) and (index_value(chunk) is None or index_value(chunk) < 0):
        return f"chunk_index {_shown(chunk)!r} is not a non-negative integer"
    return None


def _true_false_error(row: dict[str, Any], task: str) -> str | None:
    """Why a true/false row cannot be scored, or None (``task``: the formats' common signature)."""
    err = _response_error(row) or _chunk_error(row)
    if err is not None:
        return err
    label, truth = row.get("label"), row.get("truth")
    if is_missing(label):
        return "label missing"
    if not isinstance(label, str) or not label.strip():
        return "label is not a non-empty string"
    if is_missing(truth):
        return "truth missing"
    if not isinstance(truth, (bool, np.bool_)):
        return f"truth is not a boolean ({type(truth).__name__})"
    return None


def _binary_choice_error(row: dict[str, Any], task: str) -> str | None:
    """Why a binary-choice row cannot be scored, or None (also when both options are one label of ``task``)."""
    err = _response_error(row) or _chunk_error(row)
    if err is not None:
        return err
    if is_missing(row.get("options")):
        return "options missing"
    options = _label_list(row.get("options"))
    if options is None or len(options) != 2:
        return "options is not a list of two strings"
    if is_missing(row.get("correct_index")):
        return "correct_index missing"
    if index_value(row["correct_index"]) not in (0, 1):
        return f"correct_index {_shown(row['correct_index'])!r} is not 0 or 1"
    if normalize(options[0], task) == normalize(options[1], task):
        return f"options {options} name the same label twice"
    return None


def _true_false_question(row: dict[str, Any], task: str) -> dict[str, Any]:
    """A valid true/false row's question: the asked label (canonical form) and its truth."""
    return {"label": normalize(row["label"], task), "truth": bool(row["truth"])}


def _binary_choice_question(row: dict[str, Any], task: str) -> dict[str, Any]:
    """A valid binary-choice row's question: the two options (canonical forms) and the correct index."""
    return {"options": tuple(normalize(o, task) for o in _label_list(row["options"]) or ()),
            "correct_index": index_value(row["correct_index"])}


@dataclass(frozen=True)
class DerivedFormat:
    """What differs between the derived formats: columns, checks, the judge, its scorer and their glue."""

    required: tuple[str, ...]
    row_error: Callable[[dict[str, Any], str], str | None]
    question: Callable[[dict[str, Any], str], dict[str, Any]]
    #: the part of the question that tells questions of one recording apart (the asked label)
    key: Callable[[dict[str, Any]], tuple]
    judge: Callable[[str], Any]
    judge_options: Callable[[dict[str, Any]], list[str]]
    scorer: Scorer
    #: the scorer's input row from the question and its chunks' judge results (in chunk order)
    merged: Callable[[dict[str, Any], list[dict]], dict[str, Any]]
    #: per-row output columns from the chunk's judge result (None on errors) and the question's metrics
    outputs: Callable[[dict | None, dict[str, float] | None], dict[str, Any]]


def _true_false_outputs(result: dict | None, m: dict[str, float] | None) -> dict[str, Any]:
    """``answer`` (this chunk) and the question's ``answer_<rule>``/``correct_<rule>``; nulls on errors."""
    out: dict[str, Any] = {"answer": None if result is None else _ANSWER[chunk_answers(result)[0]]}
    for rule in ("any", "majority"):
        a = None if m is None else m[f"answer_{rule}"]
        out[f"answer_{rule}"] = None if a is None or np.isnan(a) else _ANSWER[bool(a)]
        out[f"correct_{rule}"] = None if m is None else bool(m[f"correct_{rule}"])
    return out


def _binary_choice_outputs(result: dict | None, m: dict[str, float] | None) -> dict[str, Any]:
    """``parsed_index`` and ``named`` (this chunk's labels) and the question's ``choice``, ``correct`` and TP/FP/FN;
    nulls on errors."""
    return {"parsed_index": None if result is None else int(result["parsed_index"]),
            "named": None if result is None else list(result.get("extracted") or []),
            "choice": None if m is None else int(m["choice"]),
            "correct": None if m is None else bool(m["correct"]),
            **{k: None if m is None else int(m[k]) for k in ("tp", "fp", "fn")}}


DERIVED: dict[str, DerivedFormat] = {
    "true_false": DerivedFormat(
        required=("response", "label", "truth"), row_error=_true_false_error, question=_true_false_question,
        key=lambda q: (q["label"],), judge=TrueFalseJudge,
        judge_options=lambda q: [q["label"]], scorer=TrueFalseScorer(),
        merged=lambda q, rs: {"labels": ["yes" if q["truth"] else "no"],
                              "chunk_extracted": [r["extracted"] for r in rs]},
        outputs=_true_false_outputs),
    "binary_choice": DerivedFormat(
        required=("response", "options", "correct_index"), row_error=_binary_choice_error,
        question=_binary_choice_question, key=lambda q: (), judge=BinaryChoiceJudge,
        judge_options=lambda q: list(q["options"]), scorer=BinaryChoiceScorer(),
        merged=lambda q, rs: {"correct_index": q["correct_index"], "options": list(q["options"]),
                              "chunk_parsed": [r["parsed_index"] for r in rs],
                              "chunk_extracted": [r.get("extracted") for r in rs]},
        outputs=_binary_choice_outputs),
}


def _hashable(v: Any) -> Hashable:
    """A value usable in a question key: missing values are one key, lists and arrays their repr."""
    if is_missing(v):
        return None
    return v if isinstance(v, Hashable) else repr(v)


def _chunk_of(row: dict[str, Any]) -> int:
    """A valid row's chunk index (0 when it has none)."""
    return 0 if is_missing(row.get("chunk_index")) else int(index_value(row["chunk_index"]))  # type: ignore[arg-type]


def _question_error(rows: list[dict[str, Any]], questions: list[dict[str, Any]]) -> str | None:
    """Why the chunks of one question cannot be combined (a repeated chunk index, disagreeing fields), or None."""
    chunks = [_chunk_of(r) for r in rows]
    if len(set(chunks)) < len(chunks):
        return "chunk_index repeated within one question"
    differ = [k for k in questions[0] if any(q[k] != questions[0][k] for q in questions)]
    return f"chunks of one question disagree on {', '.join(differ)}" if differ else None


def group_questions(records: list[dict[str, Any]], questions: list[dict | None], errors: list[str | None],
                    spec: DerivedFormat, groups: list[str]) -> dict[tuple, list[int]]:
    """Indices of the valid rows of each question (grouping values, ``item_id`` or the row, the format's key),
    in chunk order. The rows of a question whose chunks cannot be combined become errors (``errors`` updated)."""
    keyed: dict[tuple, list[int]] = {}
    for i, (row, q) in enumerate(zip(records, questions)):
        if errors[i] is None and q is not None:
            item = _hashable(row["item_id"]) if "item_id" in row else ("row", i)
            keyed.setdefault((*(_hashable(row.get(c)) for c in groups), item, *spec.key(q)), []).append(i)
    out = {}
    for key, idx in keyed.items():
        idx.sort(key=lambda i: _chunk_of(records[i]))
        err = _question_error([records[i] for i in idx], [questions[i] for i in idx])  # type: ignore[misc]
        if err is None:
            out[key] = idx
        else:
            for i in idx:
                errors[i] = err
    return out


def judge_rows(records: list[dict[str, Any]], questions: list[dict | None], errors: list[str | None],
               spec: DerivedFormat, task: str) -> list[dict | None]:
    """The format's judge result per valid row (one batched call, lexicon of ``task``), None elsewhere;
    a judge error becomes the row's error (``errors`` updated)."""
    todo = [i for i, e in enumerate(errors) if e is None]
    options = [spec.judge_options(questions[i]) for i in todo]  # type: ignore[arg-type]
    judged = spec.judge(lexicon_name(task)).judge([records[i]["response"] for i in todo], options)
    out: list[dict | None] = [None] * len(records)
    for i, result in zip(todo, judged):
        if result.get("error") is not None:
            errors[i] = f"judge: {result['error']}"
        else:
            out[i] = result
    return out


def score_derived(df: pd.DataFrame, answer_format: str, groups: list[str],
                  task: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per input row (input columns, the format's outputs, ``error``) and per question (grouping columns,
    ``item_id`` = bootstrap unit, ``category`` = asked label, the scorer's metric columns)."""
    spec = DERIVED[answer_format]
    records = df.to_dict("records")
    errors = [spec.row_error(r, task) for r in records]
    questions = [spec.question(r, task) if e is None else None for r, e in zip(records, errors)]
    results = judge_rows(records, questions, errors, spec, task)
    keyed = group_questions(records, questions, errors, spec, groups)
    metrics = spec.scorer.score([spec.merged(questions[idx[0]], [results[i] for i in idx])  # type: ignore[arg-type]
                                 for idx in keyed.values()])
    per_question, of_row = [], {}
    for (key, idx), m in zip(keyed.items(), metrics):
        first = records[idx[0]]
        per_question.append({**{c: first.get(c) for c in groups}, "item_id": str(key[len(groups)]),
                             "category": questions[idx[0]].get("label"), **m})  # type: ignore[union-attr]
        of_row.update({i: m for i in idx})
    per_row = [{**{k: v for k, v in r.items() if k != "_input_error"},
                **spec.outputs(results[i] if errors[i] is None else None, of_row.get(i)), "error": errors[i]}
               for i, r in enumerate(records)]
    return pd.DataFrame(per_row), pd.DataFrame(per_question)


def derived_summary(per_question: pd.DataFrame, scorer: Scorer, groups: list[str], *, resamples: int,
                    seed: int) -> pd.DataFrame:
    """Long-form summary per grouping values and ``group`` (``all`` and the scorer's breakdown groups, e.g.
    ``label=<label>``): the pipeline's aggregates, bootstrap units from the scorer (recordings)."""
    columns = [*groups, "group", *SUMMARY_TAIL]
    if per_question.empty:
        return pd.DataFrame(columns=columns)
    parts = [("all", per_question), *(scorer.breakdown_groups(per_question)
                                      if hasattr(scorer, "breakdown_groups") else [])]
    df = pd.concat([g.assign(group=name) for name, g in parts], ignore_index=True)
    rows = aggregate(df, scorer.aggregates, [*groups, "group"], unit="item_id", resamples=resamples,
                     confidence=0.95, seed=seed, item_stats=scorer.item_stats)
    return pd.DataFrame(rows, columns=columns)


def render_report(task: str, extractor: str, counts: dict[str, int], summary: pd.DataFrame,
                  group_cols: list[str], labels: pd.DataFrame, dropped: int | None = None,
                  agreement: dict[str, float] | None = None, answer_format: str = "standard") -> str:
    """A short Markdown report: counts, the summary table and the per-label table."""
    title = (f"task `{task}`, extractor `{extractor}`" if answer_format == "standard"
             else f"format `{answer_format}`, task `{task}`")
    lines = [f"# Factual QA — {title}", "",
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


def group_columns(df: pd.DataFrame, group_by: Optional[str], reserved: set[str]) -> list[str]:
    """``--group-by`` columns (default: every scalar column outside ``reserved`` and ``item_id``); fails naming
    a column that is not an input grouping column."""
    if group_by is None:
        return default_group_by(df, reserved | {"item_id"})
    groups = [c.strip() for c in group_by.split(",") if c.strip()]
    unknown = [c for c in groups if c not in df.columns or c in reserved]
    if unknown:
        fail("factual", f"--group-by: no such grouping column(s) {unknown}; columns: {list(df.columns)}")
    return groups


def run_derived(input_uri: str, out: str, task: str, answer_format: str, group_by: Optional[str], *, seed: int,
                resamples: int) -> None:
    """``--format true_false|binary_choice``: read the rows, score them, write per_item/summary/report."""
    spec = DERIVED[answer_format]
    try:
        df = read_rows(input_uri, spec.required)
    except (InputError, ValueError, OSError) as e:
        fail("factual", str(e))
    groups = group_columns(df, group_by, {*spec.required, "_input_error", "item_id", "chunk_index", "group"})
    per_row, per_question = score_derived(df, answer_format, groups, task)
    summary = derived_summary(per_question, spec.scorer, groups, resamples=resamples, seed=seed)
    ok = per_row["error"].isna()
    counts = {"in": len(per_row), "scored": int(ok.sum()), "errored": int((~ok).sum())}
    report = render_report(task, "lexicon", counts, summary, [*groups, "group"], pd.DataFrame(),
                           answer_format=answer_format)
    write_outputs(out, arrow_safe(per_row, int_columns=["chunk_index", "parsed_index", "choice", "tp", "fp", "fn"]),
                  summary, report)
    typer.echo(f"rows: {counts['in']} in = {counts['scored']} scored + {counts['errored']} errored", err=True)
    typer.echo(f"wrote {out}/per_item.parquet, summary.parquet, report.md", err=True)
    exit_if_unscored("factual", per_row["error"], counts["scored"])


@score_app.command("factual")
def factual(
    input_uri: str = typer.Argument(..., metavar="INPUT", help="Parquet or JSONL with `response` and `labels` "
                                    "(other columns with --format, see there)."),
    out: str = typer.Option(..., "--out", help="Output directory (local path or s3://)."),
    task: str = typer.Option(..., "--task", help="genre | genre-tree | genre-node | instrument | composer"),
    answer_format: str = typer.Option("standard", "--format", help="standard (labels extracted from free text) | "
                                      "true_false (rows: response, label, truth) | binary_choice (rows: "
                                      "response, options, correct_index)."),
    extractor: str = typer.Option("lexicon", "--extractor", help="lexicon (offline, deterministic) | llm"),
    vocab: Optional[Path] = typer.Option(None, "--vocab", help="JSON or text vocabulary replacing the task's."),
    tree: Optional[Path] = typer.Option(None, "--tree", help="FMA genres.csv or JSON {genre: top-level} "
                                        "for the genre tasks."),
    group_by: Optional[str] = typer.Option(None, "--group-by", help="Comma-separated grouping columns "
                                           "(default: every scalar column but response/labels/item_id)."),
    seed: int = SEED_OPTION,
    resamples: int = RESAMPLES_OPTION,
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
    if answer_format not in FORMATS:
        fail("factual", f"unknown --format {answer_format!r}; choose one of {', '.join(FORMATS)}")
    if answer_format != "standard":
        if extractor != "lexicon" or vocab is not None or tree is not None:
            fail("factual", f"--format {answer_format} reads answers with its own judge; --extractor llm, --vocab "
                            "and --tree apply to --format standard only")
        return run_derived(input_uri, out, task, answer_format, group_by, seed=seed, resamples=resamples)
    try:
        genre_tree = read_tree(tree, task) if tree is not None else {}
        lexicon = build_lexicon(task, vocab, genre_tree)
        df = read_rows(input_uri, ["response", "labels"])
    except (InputError, ValueError, OSError) as e:
        fail("factual", str(e))
    if task == "genre-tree" and not genre_tree:
        typer.echo("note: no --tree given; same-tree credit then only applies to identical top-level genres",
                   err=True)
    groups = group_columns(df, group_by, _RESERVED)

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
    exit_if_unscored("factual", per_item["error"], counts["scored"])
