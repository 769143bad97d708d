"""CMI-Bench's multi-class accuracy (``get_multiclass_acc`` of the released ``evaluate.py``, commit 4c15f410):
GTZAN genre, VocalSet singing technique, NSynth instrument and NSynth pitch.

The released rule, per response (:func:`correct`):

1. The label set is every distinct correct answer **of the scored file** (a list answer: its first element;
   NSynth pitch's integer answers as text), normalised (:func:`evalcore.mir_rules.rules.normalise`: ``_ - '
   space .`` removed, ``#`` → ``♯``, lower case). The dataset records that set in each item's metadata
   (``label_set``, from the rows it reads); ``evalcore score cmi`` takes it from the file scored.
2. The response, normalised the same way, is correct when it **contains** the normalised answer as a substring
   **and** contains no other label of the set.
3. Accuracy is the share of correct responses over all rows.

Consequences the tests hold (the rule's, not evalcore's): substrings count — "hiphop" in "This is hip-hop"
("hip-hop" normalises to "hiphop"); a NSynth pitch answer "9" is spoiled by "49" in the response when 9 is in the
label set, and "49" counts as containing "9"; a label absent from the file's answers never spoils anything.

``answered`` (evalcore's addition, beside the figure): the response meets rule 2 for some label of the set, i.e.
it names exactly one label — the instruction-following rate.

Where evalcore cannot follow the published rule (counted, never guessed): two answers of the file that normalise
to the same text make the released scorer stop on its assertion; each such request is an error row saying so.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from evalcore.datasets.cmi_bench import Family
from evalcore.mir_rules.rules import RULES, PublishedStops, Rule, normalise
from evalcore.stats.aggregate import Aggregate, mean_of

__all__ = ["label_set", "correct", "MulticlassRule"]


def label_set(answers: Sequence[Any]) -> list[str]:
    """The released label set of a file's correct answers, normalised, in order of first appearance; raises
    :class:`PublishedStops` when two distinct answers normalise alike (the released assertion)."""
    raw = list(dict.fromkeys(str(a[0] if isinstance(a, list) and a else a) for a in answers))
    out = list(dict.fromkeys(normalise(a) for a in raw))
    if len(out) != len(raw):
        raise PublishedStops("two correct answers of the task normalise to the same label: the released scorer "
                             "stops on its assertion")
    return out


def correct(response: str, answer: Any, labels: Sequence[str]) -> bool:
    """The released rule: the normalised response holds the answer's label and no other label of ``labels``."""
    said, target = normalise(response), normalise(str(answer[0] if isinstance(answer, list) and answer else answer))
    return target in said and all(lab not in said for lab in labels if lab != target)


@RULES.register(Family.MULTICLASS)
class MulticlassRule(Rule):
    """Accuracy by the released substring rule, over the task's label set (item metadata ``label_set``)."""

    columns = ("correct", "answered")
    aggregates = (
        Aggregate("accuracy", ("correct",), mean_of(),
                  "CMI-Bench multi-class accuracy (evaluate.py get_multiclass_acc @ 4c15f410): the normalised "
                  "response contains the answer's label and no other label of the task's answers"),
        Aggregate("answered", ("answered",), mean_of(),
                  "share of responses naming exactly one label of the task's answers (by the same substring rule)"),
    )

    def score(self, response: str, reference: Any, meta: Mapping[str, Any]) -> dict[str, float]:
        labels = meta.get("label_set")
        if not isinstance(labels, list) or not labels:
            raise PublishedStops("no label_set in the item's metadata (the task's correct answers)")
        labels = label_set(labels)
        # :func:`correct` for the answer and for every label, with the response normalised and searched once per
        # label (not once per pair of labels: quadratic in the label set over a long answer)
        said = normalise(response)
        present = {lab for lab in labels if lab in said}
        target = normalise(str(reference[0] if isinstance(reference, list) and reference else reference))
        right = target in said and not (present - {target})
        answered = right or len(present) == 1
        return {"correct": float(right), "answered": float(answered)}
