"""``evalcore score factual --format true_false|binary_choice``: the derived formats, read by the pipeline's
judges and scored by its stage.

Rows: ``response`` + ``label`` (asked) + ``truth`` (bool), or ``response`` + ``options`` (two, in presented
order) + ``correct_index`` (0/1). Rows sharing grouping values, ``item_id`` and, for true/false, the label are
one question's chunks (``chunk_index``); each question becomes one request of judged chunk rows, merged and
scored like a run's by :func:`evalcore.cli.score.stage.score_judged` (:mod:`evalcore.scorers.factual_formats`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Optional

import numpy as np
import pandas as pd

from evalcore.cli.score.factual_rows import label_list, render_report, response_error
from evalcore.cli.score.io import arrow_safe, index_value, is_missing, write_outputs
from evalcore.cli.score.stage import score_judged, scorer
from evalcore.cli.score.steps import (WROTE, Counts, close, group_columns, judge, judge_answers, read_input,
                                      summary_of)
from evalcore.scorers.factual_formats import chunk_answers
from evalcore.vocab import lexicon_name, normalize

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


def _first(row: dict[str, Any], *checks: Callable[[dict[str, Any]], str | None]) -> str | None:
    """The first reason the ``checks`` give for ``row`` (in order, stopping there; an empty one counts as none),
    or None."""
    return next((err for check in checks if (err := check(row))), None)


def _true_false_error(row: dict[str, Any], task: str) -> str | None:
    """Why a true/false row cannot be scored, or None (``task``: the formats' common signature)."""
    return _first(row, response_error, _chunk_error, _true_false_fields)


def _true_false_fields(row: dict[str, Any]) -> str | None:
    """Why a true/false row's ``label`` or ``truth`` is unusable, or None."""
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
    return _first(row, response_error, _chunk_error, lambda r: _binary_choice_fields(r, task))


def _binary_choice_fields(row: dict[str, Any], task: str) -> str | None:
    """Why a binary-choice row's ``options`` or ``correct_index`` is unusable, or None."""
    if is_missing(row.get("options")):
        return "options missing"
    options = label_list(row.get("options"))
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
    return {"options": tuple(normalize(o, task) for o in label_list(row["options"]) or ()),
            "correct_index": index_value(row["correct_index"])}


@dataclass(frozen=True)
class DerivedFormat:
    """What differs between the derived formats: columns, checks, the registered judge reading them, the protocol
    kind scoring them and their glue."""

    required: tuple[str, ...]
    row_error: Callable[[dict[str, Any], str], str | None]
    question: Callable[[dict[str, Any], str], dict[str, Any]]
    #: the part of the question that tells questions of one recording apart (the asked label)
    key: Callable[[dict[str, Any]], tuple]
    #: the registered judge reading an answer (its ``vocabulary``: the task's lexicon)
    judge: str
    judge_options: Callable[[dict[str, Any]], list[str]]
    #: the protocol kind whose registered scorer scores a question (the pipeline's)
    kind: str
    #: the request's fields of a judged chunk row, from the question (what a run's request rows carry)
    request: Callable[[dict[str, Any]], dict[str, Any]]
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
        key=lambda q: (q["label"],), judge="true_false",
        judge_options=lambda q: [q["label"]], kind="true_false",
        request=lambda q: {"labels": ["yes" if q["truth"] else "no"]},
        outputs=_true_false_outputs),
    "binary_choice": DerivedFormat(
        required=("response", "options", "correct_index"), row_error=_binary_choice_error,
        question=_binary_choice_question, key=lambda q: (), judge="binary_choice",
        judge_options=lambda q: list(q["options"]), kind="binary_choice",
        request=lambda q: {"correct_index": q["correct_index"], "options": list(q["options"])},
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
    results = judge_answers(f"{spec.kind} judge", judge(spec.judge, vocabulary=lexicon_name(task)),
                            [records[i]["response"] for i in todo], options)
    out: list[dict | None] = [None] * len(records)
    for i, result in zip(todo, results):
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
    # each question is one request: its chunks' judge results as judged rows, merged and scored by the stage
    judged = [{"request_id": str(q), "chunk_index": c, **spec.request(questions[i]),  # type: ignore[arg-type]
               "extracted": results[i].get("extracted"), "parsed_index": results[i].get("parsed_index")}  # type: ignore[union-attr]
              for q, idx in enumerate(keyed.values()) for c, i in enumerate(idx)]
    stage = score_judged(judged, spec.kind)
    per_question, of_row = [], {}
    for q, (key, idx) in enumerate(keyed.items()):
        if str(q) in stage.errors:  # a request the scorer refused: its rows are error rows
            for i in idx:
                errors[i] = stage.errors[str(q)]
            continue
        m = stage.metrics[str(q)]
        first = records[idx[0]]
        per_question.append({**{c: first.get(c) for c in groups}, "item_id": str(key[len(groups)]),
                             "category": questions[idx[0]].get("label"), **m})  # type: ignore[union-attr]
        of_row.update({i: m for i in idx})
    per_row = [{**{k: v for k, v in r.items() if k != "_input_error"},
                **spec.outputs(results[i] if errors[i] is None else None, of_row.get(i)), "error": errors[i]}
               for i, r in enumerate(records)]
    return pd.DataFrame(per_row), pd.DataFrame(per_question)


def derived_summary(per_question: pd.DataFrame, kind: str, groups: list[str], *, resamples: int,
                    seed: int) -> pd.DataFrame:
    """Long-form summary per grouping values and ``group`` (``all`` and the scorer's breakdown groups, e.g.
    ``label=<label>``): the pipeline's aggregates, bootstrap units from the scorer (recordings)."""
    kind_scorer = scorer(kind)
    parts = [] if per_question.empty else [("all", per_question), *(
        kind_scorer.breakdown_groups(per_question) if hasattr(kind_scorer, "breakdown_groups") else [])]
    df = pd.concat([g.assign(group=name) for name, g in parts], ignore_index=True) if parts else per_question
    return summary_of(df, kind_scorer.aggregates, [*groups, "group"], unit="item_id", resamples=resamples,
                      seed=seed, item_stats=kind_scorer.item_stats)


def run_derived(input_uri: str, out: str, task: str, answer_format: str, group_by: Optional[str], *, seed: int,
                resamples: int, quiet: bool = False) -> None:
    """``--format true_false|binary_choice``: read the rows, score them, write per_item/summary/report."""
    spec = DERIVED[answer_format]
    df = read_input("factual", input_uri, spec.required)
    groups = group_columns("factual", df, group_by,
                           {*spec.required, "_input_error", "item_id", "chunk_index", "group"})
    per_row, per_question = score_derived(df, answer_format, groups, task)
    summary = derived_summary(per_question, spec.kind, groups, resamples=resamples, seed=seed)
    counts = Counts.of(per_row["error"])
    report = render_report(task, "lexicon", counts, summary, [*groups, "group"], pd.DataFrame(),
                           answer_format=answer_format)
    write_outputs(out, arrow_safe(per_row, int_columns=["chunk_index", "parsed_index", "choice", "tp", "fp", "fn"]),
                  summary, report)
    close("factual", counts, per_row["error"], quiet=quiet, out=out, wrote=WROTE)

