"""Which vocabulary a factual protocol extracts labels into: the default judge, and configured
vocabularies that cannot fit the task.

A dataset declares, from its config params alone, the lexicon of each factual task it produces
(:meth:`evalcore.datasets.base.Dataset.factual_vocabulary`: FMA genre tasks → ``genre`` plus
``genres.csv`` as the tree, MusicNet → ``musicnet_instrument`` or ``composer``, the synthetic demo →
``instrument``). So, before anything is read:

* a ``factual`` protocol without a judge gets the ``lexicon`` judge for its tasks' vocabularies
  (``vocabulary: auto`` with the declared task → lexicon map and the genre tree), never the
  instrument lexicon for a genre or composer task; rows whose task names no vocabulary at all (an
  items file without ``task``), and an ``instrument`` task of a dataset that declares none (an items
  file), keep the general instrument lexicon, the former default (the built-in map's MusicNet
  instruments are for MusicNet);
  ``true_false`` and ``binary_choice`` get their readers, which take the lexicon from the asked labels;
* a configured vocabulary that scores (the judge's, or the protocol's ``vocabulary`` for the
  ``{vocabulary}`` placeholder) and cannot fit a declared task is a config error naming the field: a named
  lexicon of another label family (instrument labels for a genre task), or a list sharing no label with
  the task's vocabulary. Datasets that declare nothing (``items_file``) are not checked, nor is an
  ``agreement_judge`` (it only measures agreement, e.g. of two vocabularies, and never scores).
"""

from __future__ import annotations

from typing import Any, Iterator

from evalcore.config import JudgeConfig, ProtocolConfig, RunConfig

__all__ = ["FACTUAL_KINDS", "default_judge", "fit_problems", "task_family"]

#: protocol kinds whose answers are read into labels of a closed vocabulary
FACTUAL_KINDS = ("factual", "true_false", "binary_choice")
#: lexicon name → the family of labels it holds
_LEXICON_FAMILY = {"instrument": "instrument", "musicnet_instrument": "instrument", "genre": "genre",
                   "composer": "composer"}
_DERIVED_SUFFIXES = ("-binary", "-true-false")


def task_family(task: str) -> str | None:
    """``genre`` / ``instrument`` / ``composer`` for a factual task (derived-format suffixes ignored)."""
    for suffix in _DERIVED_SUFFIXES:
        if task.endswith(suffix):
            task = task[: -len(suffix)]
    if task.startswith("genre"):
        return "genre"
    return task if task in ("instrument", "composer") else None


def _declared(cfg: RunConfig, proto: ProtocolConfig) -> Iterator[tuple[str, str, str, str | None]]:
    """(dataset name, task, lexicon name, tree) of every factual task the protocol's datasets declare."""
    import evalcore.datasets  # noqa: F401  (registers the datasets)
    from evalcore.registry import DATASETS

    for d in cfg.datasets:
        if proto.datasets is not None and d.name not in proto.datasets:
            continue
        declared = DATASETS.get(d.kind).factual_vocabulary(dict(d.params))
        for task, lexicon in declared.tasks.items():
            yield d.name, task, lexicon, declared.tree


def _undeclared(cfg: RunConfig, proto: ProtocolConfig) -> bool:
    """Whether one of the protocol's datasets declares no factual task (e.g. an items file)."""
    import evalcore.datasets  # noqa: F401  (registers the datasets)
    from evalcore.registry import DATASETS

    return any(not DATASETS.get(d.kind).factual_vocabulary(dict(d.params)).tasks for d in cfg.datasets
               if proto.datasets is None or d.name in proto.datasets)


def default_judge(cfg: RunConfig, proto: ProtocolConfig) -> JudgeConfig | None:
    """The judge of a protocol whose config names none (None for free-form QA)."""
    if proto.kind == "mcq":
        return JudgeConfig(kind="mcq_string")
    if proto.kind in ("true_false", "binary_choice"):
        return JudgeConfig(kind=proto.kind)
    if proto.kind != "factual":
        return None
    tasks: dict[str, str] = {}
    trees = []
    for _, task, lexicon, tree in _declared(cfg, proto):
        if tasks.setdefault(task, lexicon) != lexicon:
            tasks[task] = "auto-conflict"  # two datasets label one task differently: the built-in map decides
        if tree and task_family(task) == "genre":
            trees.append(tree)
    params: dict[str, Any] = {"vocabulary": "auto", "fallback": "instrument"}
    known = {t: v for t, v in tasks.items() if v != "auto-conflict"}
    if "instrument" not in tasks and _undeclared(cfg, proto):
        known["instrument"] = "instrument"  # an items file's "instrument" task: the general lexicon, the former default
    if known:
        params["tasks"] = known
    if len(set(trees)) == 1:
        params["tree"] = trees[0]
    return JudgeConfig(kind="lexicon", params=params)


def _vocabularies(proto: ProtocolConfig, i: int) -> Iterator[tuple[str, Any]]:
    """(field path, value) of every vocabulary the protocol configures."""
    if proto.vocabulary is not None:
        yield f"protocols.{i}.vocabulary", proto.vocabulary
    if proto.judge is not None and proto.judge.params.get("vocabulary") is not None:
        yield f"protocols.{i}.judge.params.vocabulary", proto.judge.params["vocabulary"]


def _misfit(value: Any, task: str, lexicon: str) -> str | None:
    """Why ``value`` (a lexicon name or a label list) cannot hold the labels of ``task``, or None."""
    from evalcore.judges.lexicon import LEXICONS

    family = task_family(task) or _LEXICON_FAMILY.get(lexicon)
    if isinstance(value, str):
        if value == "auto" or value not in _LEXICON_FAMILY:
            return None  # "auto" fits every task; unknown names are reported by the judge's own check
        if _LEXICON_FAMILY[value] != family:
            return f"{value!r} holds {_LEXICON_FAMILY[value]} labels"
        return None
    if isinstance(value, (list, tuple)) and lexicon in LEXICONS:
        labels = {str(v).strip().lower() for v in value}
        if not labels & {lab.lower() for lab in LEXICONS[lexicon].labels}:
            return "the list shares no label with it"
    return None


def fit_problems(cfg: RunConfig) -> list[str]:
    """One line per configured vocabulary that cannot fit a task of its protocol's datasets."""
    out = []
    for i, proto in enumerate(cfg.protocols):
        if proto.kind not in FACTUAL_KINDS:
            continue
        declared = list(_declared(cfg, proto))
        for path, value in _vocabularies(proto, i):
            for dataset, task, lexicon, _ in declared:
                why = _misfit(value, task, lexicon)
                if why is not None:
                    out.append(f"{path}: cannot fit task {task!r} of dataset {dataset!r} ({why}; its labels are "
                               f"the {lexicon!r} vocabulary); name that vocabulary, or leave the judge out to get "
                               "the lexicon of each task")
                    break
    return out
