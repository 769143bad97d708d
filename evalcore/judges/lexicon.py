"""The ``lexicon`` judge: the labels of a closed vocabulary mentioned in each response, by the deterministic
extraction rules of :mod:`evalcore.vocab.extract` (a rule-based stand-in for the LLM extractor of "Factual and
musical metrics for Music LMs", §4.1, Appendix B.1). The vocabularies, their lexicons and the choice of a row's
lexicon live in :mod:`evalcore.vocab`."""

from __future__ import annotations

from typing import Sequence

from evalcore.judges.base import JUDGES, JudgeBase, Judgment
from evalcore.vocab.extract import extract
from evalcore.vocab.tasks import TaskLexicons

__all__ = ["LexiconJudge"]


@JUDGES.register("lexicon")
class LexiconJudge(TaskLexicons, JudgeBase):
    """Factual-protocol judge: the labels of a closed vocabulary mentioned in each response.

    ``vocabulary``: a name in :data:`evalcore.vocab.lexicon.LEXICONS`, or ``"auto"`` — each row's lexicon from
    its task: ``tasks`` (task → lexicon name, e.g. what the datasets of a run declare:
    :func:`evalcore.runconfig.vocab_fit.default_judge`), else the built-in map
    (:func:`evalcore.vocab.labels.lexicon_name`: FMA genre tasks → genres, ``instrument`` → the
    MusicNet instruments, ``composer`` → composers), so one protocol can hold every factual task; a row whose
    task has no vocabulary (none, or unknown) uses ``fallback`` if given, else is an error row.
    ``tree`` (FMA ``genres.csv`` or a JSON {genre: top-level}) widens the genre lexicon to every genre
    of the tree for ``genre-tree`` and ``genre-node`` rows; ``genre-tree`` rows then report each genre
    mentioned as its top-level genre (the "same tree" credit against the FMA top-level label, i.e.
    :func:`evalcore.scorers.factual_modes.apply_mode` ``"top"``), ``genre-node`` rows the genres
    themselves (exact). ``genre`` rows use the 16 top-level genres only. The params and the choice of a
    row's lexicon are :class:`~evalcore.vocab.tasks.TaskLexicons`'.
    """

    path_params = {"tree": "file"}  # must exist (evalcore validate)

    version = "2"
    uses_tasks = True

    def _one(self, text: str, task: str | None) -> Judgment:
        try:
            lexicon = self._lexicon(task)
        except ValueError as e:
            return {"extracted": None, "error": f"lexicon: {e}"}
        labels = extract(text, lexicon)
        if task == "genre-tree" and lexicon is self._tree_lexicon:
            labels = list(dict.fromkeys(self.tree.get(lab, lab) for lab in labels))
        return {"extracted": labels}

    def judge(self, texts: list[str | None], options: list[list[str] | None],
              tasks: Sequence[str | None] | None = None,
              questions: Sequence[str | None] | None = None) -> list[Judgment]:
        """One ``{"extracted": [...]}`` per text; ``options`` and ``questions`` are not read."""
        if len(texts) != len(options) or (tasks is not None and len(tasks) != len(texts)):
            raise ValueError(f"{len(texts)} texts but {len(options)} option lists")
        tasks = tasks if tasks is not None else [None] * len(texts)
        return [{"extracted": None, "error": "no response"} if t is None else self._one(t, task)
                for t, task in zip(texts, tasks)]
