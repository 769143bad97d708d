"""The three papers' published values, as data: ``configs/paper/published.csv``, read and rendered.

One row per numeric cell of every table of "Factual and musical metrics for Music LMs" (``factual``),
HumMusQA (``hummusqa``) and MuChoMusic (``muchomusic``), keyed the way evalcore's ``tables/summary.parquet`` is
(``protocol, dataset, model, condition, variant, group, metric``: the names of ``configs/paper/``), so that a
run's summary can be set beside the paper's number. ``value`` (and ``sd``, where a table prints "64.3 ± 2.9")
is the string exactly as printed; ``unit`` is ``%`` where the paper prints percentages (evalcore's accuracy is a
share); ``note`` says where a cell is not a plain table cell or cannot be read plainly. Tables are named as the
papers number them (``table8``). Numbers printed in the prose are each paper's ``text`` table, every one with
``quote``, the sentence it comes from as the paper prints it (a number printed "2,091" is the value 2091); where it
is a fact of the dataset rather than of a model (a count of questions, a share of them), its model, condition and
variant are ``any`` (:data:`ANY`). MuChoMusic's text at hand prints no table: its main results table (accuracy
overall, Knowledge, Reasoning, IFR), whose number the text does not show, is ``muchomusic/results``, with the values
the authors' project page prints for it (the image's version is in the cells' notes). A figure's caption example is
not a result and is not a cell.

The columns are :data:`COLUMNS`; a file without the last one, ``quote`` (the format before it was added), still
reads, every quote empty.

``python -m evalcore.reports.published --write`` rewrites the published-values blocks of docs/reproduce.md
(between ``<!-- published:begin PAPER -->`` and ``<!-- published:end PAPER -->``) from the file; ``--check``
exits 1 when the committed page differs from what the file gives; ``--markdown`` prints the blocks.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Iterable, Sequence

REPO = Path(__file__).resolve().parents[2]
PUBLISHED_CSV = REPO / "configs" / "paper" / "published.csv"
REPRODUCE_MD = REPO / "docs" / "reproduce.md"

#: the papers' ids and the titles docs/reproduce.md gives them
PAPERS: dict[str, str] = {"factual": "Factual and musical metrics for Music LMs", "hummusqa": "HumMusQA",
                          "muchomusic": "MuChoMusic"}
#: columns that may be empty: ``sd`` (no ± printed), ``unit`` (a share or a score, not a percentage), ``note``,
#: ``quote`` (required in ``text`` tables only)
OPTIONAL = ("sd", "unit", "note", "quote")
#: model, condition and variant of a prose number that is a fact of the dataset, whatever model ran
ANY = "any"
#: a note's words for a number the paper prints as an upper bound
BOUND_NOTE = 'an upper bound ("less than"), not a value'
TABLE_ID = re.compile(r"table\d+|text|results")
NUMBER = re.compile(r"\d+(\.\d+)?")
MAX_PROBLEMS = 5  # problems named in one error; the rest are counted


class PublishedError(ValueError):
    """The published-values file (or a page's markers) is malformed; the message names the first problems."""


@dataclass(frozen=True)
class Cell:
    """One printed number of a paper's table, keyed by evalcore's summary columns."""

    paper: str
    table: str
    protocol: str
    dataset: str
    model: str
    condition: str
    variant: str
    group: str
    metric: str
    value: str
    sd: str
    unit: str
    note: str
    quote: str = ""  # a ``text`` cell's sentence, as the paper prints it

    @property
    def key(self) -> str:
        """``paper/table``, e.g. ``factual/table8``."""
        return f"{self.paper}/{self.table}"

    @property
    def summary_key(self) -> tuple[str, ...]:
        """The cell's key in a run's summary: protocol, dataset, model, condition, variant, group, metric."""
        return (self.protocol, self.dataset, self.model, self.condition, self.variant, self.group, self.metric)

    @property
    def number(self) -> float:
        """``value`` as a float, in the paper's unit (``unit == "%"``: percent)."""
        return float(self.value)

    @property
    def is_bound(self) -> bool:
        """Whether the paper prints an upper bound ("less than 3.5 %"), not a value (said in ``note``)."""
        return BOUND_NOTE in self.note

    @property
    def sd_number(self) -> float | None:
        """``sd`` as a float, None where the table prints no ±."""
        return float(self.sd) if self.sd else None


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Cell))
#: the columns before ``quote`` was added: such a file still reads
LEGACY_COLUMNS: tuple[str, ...] = COLUMNS[:-1]


def _in_quote(value: str, quote: str) -> bool:
    """Whether ``quote`` prints ``value`` (as a whole number; "2,091" prints 2091)."""
    plain = re.sub(r"(?<=\d),(?=\d{3})", "", quote)
    return re.search(rf"(?<![\d.]){re.escape(value)}(?!\d|\.\d)", plain) is not None


def _problems(cells: Sequence[Cell], quotes: bool = True) -> list[str]:
    """Every problem of ``cells``, one short line each (``quotes``: a ``text`` cell must have its sentence)."""
    out: list[str] = []
    seen: dict[tuple[str, ...], int] = {}
    for i, c in enumerate(cells, start=2):  # line 1 is the header
        where = f"line {i}"
        empty = [n for n, v in zip(COLUMNS, astuple(c)) if n not in OPTIONAL and not v]
        if empty:
            out.append(f"{where}: empty {', '.join(empty)}")
        if c.paper not in PAPERS:
            out.append(f"{where}: paper {c.paper[:40]!r} is not one of {sorted(PAPERS)}")
        if not TABLE_ID.fullmatch(c.table):
            out.append(f"{where}: table {c.table[:40]!r} is not 'tableN', 'text' or 'results'")
        for name, v in (("value", c.value), ("sd", c.sd)):
            if (v or name == "value") and not NUMBER.fullmatch(v):
                out.append(f"{where}: {name} {v[:40]!r} is not a number as printed (digits, optional decimals)")
        if quotes and c.table == "text" and not c.quote:
            out.append(f"{where}: a number in the prose without its sentence (quote)")
        elif c.quote and not _in_quote(c.value, c.quote):
            out.append(f"{where}: the quote does not print the value {c.value[:40]!r}")
        k = (c.paper, c.table, *c.summary_key)
        if k in seen:
            out.append(f"{where}: the same cell as line {seen[k]} ({c.key} {'/'.join(c.summary_key)})")
        seen.setdefault(k, i)
    return out


def validate(cells: Sequence[Cell], quotes: bool = True) -> None:
    """Raise :class:`PublishedError` naming the first problems if any row lacks a key, a value that parses as a
    number, a known paper or a table id, or repeats another row's cell; or if a ``text`` cell lacks its sentence
    (unless ``quotes`` is False: a file of the format before ``quote``), or its sentence does not print its value."""
    problems = _problems(cells, quotes)
    if problems:
        more = f" (and {len(problems) - MAX_PROBLEMS} more)" if len(problems) > MAX_PROBLEMS else ""
        raise PublishedError(f"{len(problems)} problem(s) in the published values: "
                             + "; ".join(problems[:MAX_PROBLEMS]) + more)


def read(path: Path | str = PUBLISHED_CSV) -> list[Cell]:
    """The file's cells in file order, validated (:func:`validate`)."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) not in (COLUMNS, LEGACY_COLUMNS):
            raise PublishedError(f"{Path(path).name}: columns {list(reader.fieldnames or [])[:20]} "
                                 f"are not {list(COLUMNS)}")
        legacy = tuple(reader.fieldnames or ()) == LEGACY_COLUMNS
        cells = [Cell(**{k: (row.get(k) or "").strip() for k in COLUMNS}) for row in reader]
    validate(cells, quotes=not legacy)
    return cells


def table_keys(cells: Iterable[Cell]) -> list[str]:
    """The ``paper/table`` keys of ``cells``, in file order."""
    return list(dict.fromkeys(c.key for c in cells))


def cells_of(key: str, cells: Iterable[Cell]) -> list[Cell]:
    """The cells of one ``paper/table`` key (``factual/table8``), in file order."""
    return [c for c in cells if c.key == key]


# ----------------------------------------------------------------------------------------------- Markdown

ROW_KEYS = ("protocol", "dataset", "model", "condition", "variant")


def _title(table: str) -> str:
    named = {"text": "In the text", "results": "Results table"}
    return named.get(table) or f"Table {table.removeprefix('table')}"


def _column(c: Cell) -> str:
    """A cell's column title: its metric, its group where not ``all``, its unit where it has one."""
    return c.metric + ("" if c.group == "all" else f" [{c.group}]") + (f" ({c.unit})" if c.unit else "")


def table_markdown(cells: Sequence[Cell]) -> str:
    """One table's cells as a Markdown table: a row per (protocol, dataset, model, condition, variant), showing
    only the keys that vary; a column per metric (and group, where not ``all``); notes numbered below."""
    shown = [k for k in ROW_KEYS if len({getattr(c, k) for c in cells}) > 1] or ["model"]
    rows: dict[tuple[str, ...], list[Cell]] = {}
    for c in cells:
        rows.setdefault(tuple(getattr(c, k) for k in shown), []).append(c)
    cols = list(dict.fromkeys(_column(c) for c in cells))
    notes: dict[str, int] = {}

    def mark(note: str) -> str:
        return f" [{notes.setdefault(note, len(notes) + 1)}]" if note else ""

    lines = ["| " + " | ".join([*shown, *cols]) + " |", "|" + "---|" * (len(shown) + len(cols))]
    for key, row in rows.items():
        row_note = row[0].note if len({c.note for c in row}) == 1 else ""  # one note for the whole row: on its key
        vals = {_column(c): c.value + (f" ± {c.sd}" if c.sd else "") + ("" if row_note else mark(c.note))
                for c in row}
        lines.append("| " + " | ".join([*key[:-1], key[-1] + mark(row_note), *(vals.get(c, "") for c in cols)])
                     + " |")
    lines += [""] + [f"- [{n}] {note}" for note, n in notes.items()] if notes else []
    return "\n".join(lines)


def text_markdown(cells: Sequence[Cell]) -> str:
    """A paper's numbers in the prose as a Markdown table: what each is (its summary key, ``any`` left out), the
    number as printed, the sentence it comes from and the note."""
    lines = ["| quantity | printed | sentence | note |", "|---|---|---|---|"]
    for c in cells:
        what = " · ".join(v for v in (c.protocol, c.dataset, c.model, c.condition, c.variant) if v != ANY)
        metric = c.metric + ("" if c.group == "all" else f" [{c.group}]") + (f" ({c.unit})" if c.unit else "")
        cell = [f"{what}: {metric}", c.value, f"“{c.quote}”", c.note]
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cell) + " |")
    return "\n".join(lines)


def paper_markdown(paper: str, cells: Sequence[Cell]) -> str:
    """The published-values block of one paper: each of its tables, in file order, under a bold title."""
    mine = [c for c in cells if c.paper == paper]
    parts = [f"Published values (`configs/paper/published.csv`, {len(mine)} cell{'s' * (len(mine) != 1)}; generated by "
             "`python -m evalcore.reports.published --write`, do not edit by hand):"]
    for key in table_keys(mine):
        tcells = cells_of(key, mine)
        protocols = ", ".join(f"`{p}`" for p in dict.fromkeys(c.protocol for c in tcells))
        body = text_markdown(tcells) if tcells[0].table == "text" else table_markdown(tcells)
        parts.append(f"**{_title(tcells[0].table)}** (protocols {protocols})\n\n{body}")
    return "\n\n".join(parts)


def _markers(paper: str) -> tuple[str, str]:
    return f"<!-- published:begin {paper} -->", f"<!-- published:end {paper} -->"


def render_doc(text: str, cells: Sequence[Cell]) -> str:
    """``text`` (docs/reproduce.md) with each paper's block between its markers regenerated; the rest untouched.
    A paper without exactly one pair of markers, in order, is an error."""
    for paper in PAPERS:
        begin, end = _markers(paper)
        if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
            raise PublishedError(f"the page needs exactly one {begin!r} followed by one {end!r}")
        head, rest = text.split(begin)
        _, tail = rest.split(end)
        text = f"{head}{begin}\n{paper_markdown(paper, cells)}\n{end}{tail}"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """``--write``: regenerate docs/reproduce.md's blocks; ``--check``: 1 if the page is stale; ``--markdown``:
    print the blocks."""
    ap = argparse.ArgumentParser(prog="python -m evalcore.reports.published", description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the page's published-values blocks")
    mode.add_argument("--check", action="store_true", help="exit 1 if the page differs from the file")
    mode.add_argument("--markdown", action="store_true", help="print the blocks")
    ap.add_argument("--csv", type=Path, default=PUBLISHED_CSV)
    ap.add_argument("--doc", type=Path, default=REPRODUCE_MD)
    args = ap.parse_args(argv)
    cells = read(args.csv)
    if args.markdown:
        print("\n\n".join(paper_markdown(p, cells) for p in PAPERS))
        return 0
    old = args.doc.read_text(encoding="utf-8")
    new = render_doc(old, cells)
    if args.check:
        if new != old:
            print(f"{args.doc} is out of date with {args.csv.name}: run python -m evalcore.reports.published "
                  "--write", file=sys.stderr)
            return 1
        return 0
    if new != old:
        args.doc.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
