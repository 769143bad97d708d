"""Which vocabulary a factual protocol extracts labels into: the default judge, fitted to the tasks the
protocol's datasets declare.

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
  ``true_false`` and ``binary_choice`` get their readers, which take the lexicon from the asked labels.

A configured vocabulary that cannot fit a declared task is a config error the preflight names
(:func:`evalcore.runconfig.preflight.vocabulary_problems`, over :func:`declared`).
"""

from __future__ import annotations

from typing import Any, Iterator

from evalcore.runconfig.config import JudgeConfig, ProtocolConfig, RunConfig
from evalcore.datasets.base import DATASETS
from evalcore.vocab.labels import task_family

__all__ = ["declared", "default_judge"]


def declared(cfg: RunConfig, proto: ProtocolConfig) -> Iterator[tuple[str, str, str, str | None]]:
    """(dataset name, task, lexicon name, tree) of every factual task the protocol's datasets declare."""
    for d in cfg.datasets:
        if proto.datasets is not None and d.name not in proto.datasets:
            continue
        found = DATASETS.get(d.kind).factual_vocabulary(dict(d.params))
        for task, lexicon in found.tasks.items():
            yield d.name, task, lexicon, found.tree


def _undeclared(cfg: RunConfig, proto: ProtocolConfig) -> bool:
    """Whether one of the protocol's datasets declares no factual task (e.g. an items file)."""
    return any(not DATASETS.get(d.kind).factual_vocabulary(dict(d.params)).tasks for d in cfg.datasets
               if proto.datasets is None or d.name in proto.datasets)


def default_judge(cfg: RunConfig, proto: ProtocolConfig) -> JudgeConfig | None:
    """The judge of a protocol whose config names none: its kind's (:attr:`ProtocolKind.judge`; None for free-form
    QA), fitted to the tasks of the protocol's datasets where its kind reads labels of a fitted vocabulary."""
    kind = proto.kind_spec
    if kind.judge is None or not kind.labels_in_vocabulary:
        return JudgeConfig(kind=kind.judge) if kind.judge is not None else None
    tasks: dict[str, str] = {}
    trees = []
    for _, task, lexicon, tree in declared(cfg, proto):
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
    return JudgeConfig(kind=kind.judge, params=params)
