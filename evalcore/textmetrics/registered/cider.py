"""CIDEr-D through pycocoevalcap (``Cider``, n=4, sigma=6, x10) with its Stanford PTB tokenizer (Java).

This is the image/music-captioning convention (coco-caption, as LLark reports CIDEr); the MU-LLaMA
script has no CIDEr. CIDEr-D weighs n-grams by IDF over a *corpus*: here a corpus is a set of rows
(e.g. one model x condition, as one evaluation run), each row one "image" with one reference. A row's
value is its candidate's CIDEr-D against its reference with document frequencies from its corpus's
references, so it changes when the corpus changes; the mean over a corpus is pycocoevalcap's corpus
score. A corpus of one row scores 0 (log of one document).

Texts reach the PTB tokenizer with every line-break character (``\\r``, ``\\v``, ``\\f``, U+2028, ...)
turned into a space: pycocoevalcap only replaces ``\\n``, and the Java tokenizer splits lines on the
others, which would silently shift every later row.
"""

from __future__ import annotations

import re
import shutil
from importlib.metadata import version
from typing import Any, Hashable, Sequence

from evalcore.textmetrics.freeform_metric import METRICS, FreeformMetric, Scored, scoreable, spread

_LINE_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00]")
JAVA_FIX = "CIDEr-D's PTB tokenizer needs a Java runtime: apt-get install -y --no-install-recommends default-jre-headless"


class MetricUnavailable(RuntimeError):
    """A model-based metric cannot run here (missing runtime or model)."""


def definition() -> str:
    return (f"pycocoevalcap {version('pycocoevalcap')} CIDEr-D (Cider n=4, sigma=6, x10) after its Stanford PTB "
            "tokenizer (lower-cased, punctuation removed) -- the captioning convention, not in the MU-LLaMA script; "
            "IDF over the references of the row's corpus")


def one_line(text: str) -> str:
    return _LINE_BREAKS.sub(" ", text)


def tokenize(texts: dict[Hashable, str]) -> dict[Hashable, str]:
    """PTB-tokenized texts (one Java call for all of them)."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    if shutil.which("java") is None:
        raise MetricUnavailable(JAVA_FIX)
    if not texts:
        return {}
    got = PTBTokenizer().tokenize({k: [{"caption": one_line(t)}] for k, t in texts.items()})
    if set(got) != set(texts):
        raise RuntimeError(f"PTB tokenizer returned {len(got)} of {len(texts)} texts")
    return {k: v[0] for k, v in got.items()}


def cider_scores(refs: Sequence[str], cands: Sequence[str], corpora: Sequence[Hashable] | None = None
                 ) -> tuple[list[float], list[str | None]]:
    """Per-row CIDEr-D and errors; rows with the same ``corpora`` label share IDF (default: one corpus)."""
    from pycocoevalcap.cider.cider import Cider

    labels = list(corpora) if corpora is not None else [0] * len(refs)
    texts = {("r", i): r for i, r in enumerate(refs)} | {("c", i): c for i, c in enumerate(cands)}
    tok = tokenize(texts)
    values: list[float] = [float("nan")] * len(refs)
    errors: list[str | None] = [None] * len(refs)
    groups: dict[Hashable, list[int]] = {}
    for i, lab in enumerate(labels):
        groups.setdefault(lab, []).append(i)
    for rows in groups.values():
        try:
            _, per = Cider().compute_score({i: [tok[("r", i)]] for i in rows}, {i: [tok[("c", i)]] for i in rows})
            for i, v in zip(rows, per):
                values[i] = float(v)
        except Exception as e:  # e.g. a corpus whose references tokenize to nothing
            for i in rows:
                errors[i] = f"cider: {type(e).__name__}: {e}"[:300]
    return values, errors


@METRICS.register("cider")
class CiderD(FreeformMetric):
    """CIDEr-D per row, IDF over its corpus: the rows sharing ``corpus`` (one dataset × model × condition ×
    prompt variant in a run), so it is scored over all of a run's rows at once, never in the stream."""

    requires = ("pycocoevalcap",)
    libraries = ("pycocoevalcap",)
    corpus = ("dataset", "model", "condition", "variant")

    def definition(self) -> str:
        return definition()

    def run_definition(self) -> str:
        return f"{definition()} (corpus = {'one ' + ' x '.join(self.corpus) if self.corpus else 'all rows'})"

    def problems(self) -> list[tuple[str, str]]:
        return [] if shutil.which("java") is not None else [("names", f"{self.name}: {JAVA_FIX}")]

    def score(self, references: Sequence[Any], candidates: Sequence[Any], checks: Sequence[str | None],
              corpora: Sequence[Hashable] | None, loaded: dict) -> Scored:
        rows = scoreable(checks, empty_too=True)  # an empty candidate stays in its corpus (pycocoevalcap gives 0)
        labels = [corpora[i] for i in rows] if corpora is not None else None
        vals, errs = cider_scores([references[i] for i in rows], [candidates[i] for i in rows], labels)
        values, errors = spread(checks, rows, vals, errs)
        return values, errors, {"definition": definition(),
                                "corpora": "rows sharing a label" if corpora is not None else "all rows"}
