"""``evalcore score mcq``: multiple-choice responses → parsed answers, per-order metrics, report.

Parsers: ``strict`` and ``muchomusic``, the MCQ music benchmarks' published rules ``mmau``, ``mmar``, ``rul`` and
``mmau-pro-bow`` (MMAU-Pro's nearest choice with the bag-of-words stand-in for NV-Embed-v2; offline) and ``llm`` (the registered ``mcq_llm`` judge
against an OpenAI-compatible endpoint, with a response cache; a failed API call makes that row
an ``error``, counted and excluded like any bad row). ``--breakdown COL[,COL…]`` adds summary
rows per value of each column (column ``breakdown`` = ``"all"`` for the main rows, else
``"<col>=<value>"``; a list-valued column counts a row under each of its values). The report
always carries the strict-vs-muchomusic parser agreement (and llm-vs-each with ``--parser llm``).

A parser that follows a published rule (``muchomusic``, ``mmau``, ``mmar``, ``rul``, ``mmau-pro-bow``) is its
registered judge: ``correct`` is the released scorer's verdict (its quirks included) and ``correct_strict``
evalcore's strict reading beside it, with ``accuracy_mean_strict`` and ``verdicts_differ`` in the summary
(:mod:`evalcore.scorers.mcq_verdicts`).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
import typer

from evalcore.reports.tables_html import fmt
from evalcore.core.schema import VERDICTS_DIFFER
from evalcore.cli.score.app import score_app
from evalcore.cli.score.io import arrow_safe, default_group_by, fail, index_value, is_missing, quiet_mode, text_error, \
    write_outputs
from evalcore.cli.score.llm_options import LLM, LlmOptions
from evalcore.cli.score.option_groups import COMMON, OUT, Common, input_argument, takes_groups
from evalcore.cli.score.released_mcq import RELEASED
from evalcore.cli.score.stage import score_judged
from evalcore.cli.score.steps import WROTE, Counts, close, columns, judge, judge_answers, read_input
from evalcore.scorers.mcq_breakdowns import as_labels
from evalcore.scorers.mcq_orders import METRICS, STRICT_METRICS, agreement, summarize_orders

REQUIRED = ["question_id", "order_id", "options", "correct_index", "response"]
#: each offline parser's registered judge and its params (a published rule's judge gives its released verdict and
#: the strict one): the MCQ music benchmarks' published rules are MMAU's word-set match (MMAR's evaluation.py keeps
#: it), RUListening's extraction, MMAU-Pro's nearest choice with its bag-of-words stand-in for NV-Embed-v2 (no
#: weights here)
PARSER_JUDGES: dict[str, tuple[str, dict[str, Any]]] = {
    "strict": ("mcq_string", {}), "muchomusic": ("mcq_muchomusic", {}), "mmau": ("mcq_mmau", {}),
    "mmar": ("mcq_mmar", {}), "rul": ("mcq_rul", {}), "mmau-pro-bow": ("mcq_mmau_pro", {"embedder": "bag-of-words"})}
PARSER_NAMES = (*PARSER_JUDGES, "llm")
#: the parsers whose agreement every report carries
AGREEMENT = ("strict", "muchomusic")
_OWN = {*REQUIRED, "_input_error", "parsed_index", "correct", "correct_strict", "error", "breakdown"}
ALL = "all"


def parser_judge(parser: str) -> Any:
    """The registered judge of an offline parser (:data:`PARSER_JUDGES`); its ``parse(text, options)`` is the
    parser."""
    name, params = PARSER_JUDGES[parser]
    return judge(name, **params)


def _options(v: Any) -> list[str] | None:
    """The option list, or None unless it is a list (or array) of at least two strings."""
    if isinstance(v, (list, tuple, np.ndarray)):
        opts = list(v)
        if len(opts) >= 2 and all(isinstance(o, str) for o in opts):
            return opts
    return None


def row_error(row: dict[str, Any]) -> str | None:
    """Why a row cannot be scored, or None."""
    if not is_missing(row.get("_input_error")):
        return str(row["_input_error"])
    for col in ("question_id", "order_id"):
        if is_missing(row.get(col)):
            return f"missing {col}"
    opts = _options(row.get("options"))
    if opts is None:
        return "options is not a list of at least two strings"
    idx = index_value(row.get("correct_index"))
    if idx is None or not 0 <= idx < len(opts):
        return f"correct_index {row.get('correct_index')!r} is not an index into {len(opts)} options"
    return text_error(row.get("response"), missing="no response")


def score_rows(df: pd.DataFrame, parser: str, judge: Any = None) -> pd.DataFrame:
    """Input rows + ``parsed_index`` (-1 = unanswered, null on error), ``correct``, ``error`` and, for a parser
    that follows a published rule, ``correct_strict``; the judged answers are scored by the scoring stage
    (:func:`evalcore.cli.score.stage.score_judged`), as in a run.

    ``parser`` "llm" needs ``judge`` (an ``mcq_llm`` judge); any other is its registered judge (:data:`PARSER_JUDGES`).
    The valid rows go to the judge in one call; a row whose judgment failed gets ``error`` =
    "<parser> parser: <reason>"."""
    records = df.to_dict("records")
    errors: list[str | None] = [row_error(r) for r in records]
    parsed: list[Any] = [None] * len(records)
    credited: list[Any] = [None] * len(records)
    if parser == "llm" and judge is None:
        raise ValueError("parser 'llm' needs a judge")
    judge = judge if parser == "llm" else parser_judge(parser)
    todo = [i for i, e in enumerate(errors) if e is None]
    # the llm matcher is shown the optional input column "question"
    questions = ([q if isinstance(q := records[i].get("question"), str) else None for i in todo]
                 if parser == "llm" and "question" in df.columns else None)
    results = judge_answers(f"{parser} parser", judge, [records[i]["response"] for i in todo],
                            [_options(records[i]["options"]) for i in todo], questions=questions)
    for i, r in zip(todo, results):
        if r.get("error") is not None or r.get("parsed_index") is None:
            errors[i] = f"{parser} parser: {r.get('error') or 'no result'}"
        else:
            parsed[i], credited[i] = int(r["parsed_index"]), r.get("credited")
    # the judged answers as judged rows, scored by the pipeline's stage (the registered mcq scorer)
    judged = [{"request_id": str(i), "parsed_index": p, "credited": c, "options": _options(r["options"]),
               "correct_index": index_value(r["correct_index"])}
              for i, (r, p, c, e) in enumerate(zip(records, parsed, credited, errors)) if e is None]
    stage = score_judged(judged, "mcq")
    errors = [e if e is not None else stage.errors.get(str(i)) for i, e in enumerate(errors)]
    metrics = [None if e is not None else stage.metrics[str(i)] for i, e in enumerate(errors)]
    out = df.drop(columns=["_input_error"], errors="ignore").copy()
    out["parsed_index"] = pd.array([None if e is not None else p for p, e in zip(parsed, errors)], dtype="Int64")
    out["correct"] = pd.array([None if m is None else bool(m["correct"]) for m in metrics], dtype="boolean")
    if getattr(judge, "rule", None) is not None:  # a published rule: its verdict above, the strict one beside it
        out["correct_strict"] = pd.array([None if m is None else bool(m["correct_strict"]) for m in metrics],
                                         dtype="boolean")
    out["error"] = pd.array(errors, dtype="string")
    return out


def parser_agreement(df: pd.DataFrame, per_item: pd.DataFrame, parser: str) -> list[tuple[str, str, float, int]]:
    """(parser a, parser b, agreement, responses): strict vs muchomusic over every row without an
    input error (offline, always), a benchmark's parser (``mmau`` …) vs strict, and with ``parser`` "llm" the llm
    parse vs strict and vs muchomusic over the rows the llm parsed."""
    records = df.to_dict("records")
    valid = [i for i, r in enumerate(records) if row_error(r) is None]
    names = ["strict", "muchomusic"] + ([parser] if parser in PARSER_JUDGES and parser not in AGREEMENT else [])
    parse = {name: parser_judge(name).parse for name in names}
    offline = {name: [parse[name](records[i]["response"], _options(records[i]["options"])) for i in valid]
               for name in names}
    out = [("strict", "muchomusic", agreement(offline["strict"], offline["muchomusic"]), len(valid))]
    if parser not in AGREEMENT and parser in PARSER_JUDGES:
        out.append((parser, "strict", agreement(offline[parser], offline["strict"]), len(valid)))
    if parser == "llm":
        llm = per_item["parsed_index"].tolist()
        keep = [k for k, i in enumerate(valid) if not is_missing(llm[i])]
        got = [int(llm[valid[k]]) for k in keep]
        for name in AGREEMENT:
            out.append(("llm", name, agreement(got, [offline[name][k] for k in keep]), len(keep)))
    return out


def breakdown_summary(scored: pd.DataFrame, by: list[str], breakdown: list[str], *, resamples: int,
                      seed: int) -> pd.DataFrame:
    """The main summary (``breakdown`` = "all") followed by one block per value of each breakdown column."""
    main = summarize_orders(scored, by, resamples=resamples, seed=seed)
    main.insert(len(by), "breakdown", ALL)
    parts = [main]
    for col in breakdown:
        # one row per label of a scalar or a list of scalars; an object gives no label (never printed raw)
        values = [[None] if is_missing(v) else as_labels(v) for v in scored[col]]
        work = scored.iloc[[i for i, vs in enumerate(values) for _ in vs]]
        work = work.assign(**{col: pd.Series([x for vs in values for x in vs], index=work.index, dtype=object)})
        part = summarize_orders(work, [*by, col], resamples=resamples, seed=seed)
        label = [f"{col}=<missing>" if is_missing(v) else f"{col}={v}" for v in part[col]]
        part = part.drop(columns=[col])
        part.insert(len(by), "breakdown", pd.Series(label, index=part.index, dtype=object))
        parts.append(part)
    parts = [p for p in parts if not p.empty]
    if not parts:
        return main
    return pd.concat(parts, ignore_index=True)


def render_report(summary: pd.DataFrame, by: list[str], parser: str, counts: Counts,
                  agreements: Sequence[tuple[str, str, float, int]] = ()) -> str:
    """A short Markdown report: one row per group (and per breakdown value), then parser agreement."""
    strict = not summary.empty and VERDICTS_DIFFER in set(summary["metric"])
    lines = ["# Multiple-choice scores", "",
             f"Parser: `{parser}`. Rows: {counts.n_in} in = {counts.scored} scored + {counts.errored} errored.", ""]
    if strict:
        lines += [f"The `{parser}` parser follows a published rule: accuracy is the released scorer's verdict, its "
                  "quirks included; `accuracy_mean_strict` is evalcore's strict reading of the same rule (the one "
                  "option named, never guessed), and *differ* counts the questions whose two verdicts differ in "
                  "at least one order.", ""]
    lines += ["| group | questions | accuracy (mean ± SD over orders) | "
              + ("accuracy_mean_strict | differ | " if strict else "") + "consistency | IFR |",
              "|---|---|---|" + ("---|---|" if strict else "") + "---|---|"]
    agree = ["", "Parser agreement (share of responses parsed to the same index; both unanswered = agree):", ""]
    agree += [f"- parser agreement {a} vs {b}: {fmt(v)} over {n} responses" for a, b, v, n in agreements]
    if summary.empty:
        return "\n".join([*lines, "| (no scored rows) | | | | |", *agree, ""])
    keys = [*by, "breakdown"] if "breakdown" in summary.columns else list(by)
    keyed = summary.assign(_k=[tuple(r) for r in summary[keys].itertuples(index=False)])
    for key, g in keyed.groupby("_k", sort=False):
        v = dict(zip(g["metric"], g["value"]))
        n = int(g["n"].iloc[0])
        parts = [f"{c}={k}" for c, k in zip(by, key)]
        if len(key) > len(by) and key[-1] != ALL:
            parts.append(str(key[-1]))
        name = ", ".join(parts) or "all"
        twin = (f" {fmt(v[STRICT_METRICS[0]])} | {int(v[VERDICTS_DIFFER])} of {n} |" if strict else "")
        lines.append(f"| {name} | {n} | {fmt(v['accuracy_mean'])} ± {fmt(v['accuracy_sd'])} |{twin}"
                     f" {fmt(v['consistency'])} | {fmt(v['ifr'])} |")
    lines += agree
    lines += ["", "Definitions:", ""]
    defs = summary.drop_duplicates("metric").set_index("metric")["definition"]
    lines += [f"- **{m}**: {defs[m]}" for m in (*METRICS, *STRICT_METRICS) if m in defs.index]
    return "\n".join([*lines, ""])


@score_app.command("mcq")
@takes_groups
def score_mcq(
    input_uri: str = input_argument("rows: question_id, order_id, options, correct_index (0-based), "
                                    "response, plus grouping columns."),
    out: str = OUT,
    parser: str = typer.Option("strict", "--parser", help="Answer parser: strict | muchomusic | mmau | mmar | rul | "
                               "mmau-pro-bow (MMAU-Pro's rule, bag-of-words stand-in) | llm."),
    group_by: Optional[str] = typer.Option(None, "--group-by", help="Comma-separated group columns "
                                           "(default: every non-required scalar column not in --breakdown; "
                                           "'' = no groups)."),
    breakdown: Optional[str] = typer.Option(None, "--breakdown", help="Comma-separated columns: extra summary "
                                            "rows per value of each (e.g. category,difficulty,genre)."),
    released: Optional[str] = typer.Option(None, "--released", help="INPUT is a benchmark's released output file: "
                                           "mmau (its JSON with model_output) | mmar (MMAR-meta with "
                                           "answer_prediction)."),
    llm: LlmOptions = LLM,
    common: Common = COMMON,
) -> None:
    """Parse multiple-choice answers and score accuracy over option orders, consistency and IFR."""
    quiet_mode(common.quiet)
    _check_options(parser, common.resamples, released)
    df = read_input("mcq", input_uri, REQUIRED, released=released, limit=300)
    bd, by = _summary_columns(df, group_by, breakdown)
    per_item = score_rows(df, parser, llm.judge("mcq", "--parser llm", "mcq_llm") if parser == "llm" else None)
    agreements = parser_agreement(df, per_item, parser)
    summary = breakdown_summary(_scored(per_item), by, bd, resamples=common.resamples, seed=common.seed)
    counts = Counts.of(per_item["error"])
    per_item = arrow_safe(per_item, int_columns=("question_id", "order_id", "correct_index"))
    write_outputs(out, per_item, summary, render_report(summary, by, parser, counts, agreements))
    close("mcq", counts, per_item["error"], quiet=common.quiet, out=out, wrote=WROTE)


def _check_options(parser: str, resamples: int, released: str | None) -> None:
    """``--parser``, ``--resamples`` and ``--released`` name what there is, or the command exits 2."""
    if parser not in PARSER_NAMES:
        fail("mcq", f"unknown parser {parser!r}; choose one of: {', '.join(PARSER_NAMES)}")
    if resamples < 1:
        fail("mcq", f"--resamples must be at least 1, got {resamples}")
    if released is not None and released not in RELEASED:
        fail("mcq", f"unknown --released {released!r}; choose one of: {', '.join(RELEASED)}")


def _summary_columns(df: pd.DataFrame, group_by: Optional[str], breakdown: Optional[str]) -> tuple[list[str], list[str]]:
    """(``--breakdown`` columns, ``--group-by`` columns: by default every scalar column not the command's own or a
    breakdown's); a column that is not an input column, or is in both, exits 2."""
    bd = columns(breakdown)
    unknown = [c for c in bd if c not in df.columns or c in _OWN]
    if unknown:
        fail("mcq", f"--breakdown: not input column(s) {unknown}; columns are "
                    f"{[c for c in df.columns if c != '_input_error']}")
    if group_by is None:
        return bd, default_group_by(df, _OWN | set(bd))
    by = columns(group_by)
    unknown = [c for c in by if c not in df.columns or c in _OWN]
    if unknown:
        fail("mcq", f"--group-by: not input grouping column(s) {unknown}; columns are {list(df.columns)}")
    both = [c for c in bd if c in by]
    if both:
        fail("mcq", f"column(s) {both} are in both --group-by and --breakdown")
    return bd, by


def _scored(per_item: pd.DataFrame) -> pd.DataFrame:
    """The scored rows, their answers and verdicts as plain ints and bools."""
    ok = per_item[per_item["error"].isna()]
    return ok.assign(parsed_index=ok["parsed_index"].astype(int), correct=ok["correct"].astype(bool),
                     **({"correct_strict": ok["correct_strict"].astype(bool)} if "correct_strict" in ok else {}))
