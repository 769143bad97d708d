"""Where a run's files must lie when its Ray cluster has several nodes, which share no disk.

What each node touches (docs/cluster.md, "Many nodes"):

* **The driver's node** reads the config and the datasets' item files, and writes every file of the run root: the
  items stage, the tables and the report on the driver itself, every shard by a commit task pinned to the driver's
  node (:mod:`evalcore.pipeline.committer`). So a local run root works on any cluster: it is the driver's disk.
* **Any node** decodes audio, loads a model's checkpoint or a free-form metric's model files in its actors, reads a
  judge's files, and reads and writes an LLM-backed judge's or model's cache and request log.

On a cluster where work may run on a node other than the driver's (:attr:`Nodes.spread`: more than one node
alive, or a driver's node that offers no CPU, as a KubeRay head started with ``num-cpus: 0``), everything of the
second list must be on storage every node reaches: ``s3://``, or a local path under ``storage.shared_paths`` (a
mount every node has at the same place). :func:`config_problems` and :func:`audio_problems` name what is not, one
line per field, before any request runs (``evalcore run``: exit 2; ``evalcore validate`` with a cluster address
too). A path under ``shared_paths`` that a node does not in fact mount is found only when that node reads it: the
decode stage's error row then names the node (:func:`elsewhere`).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from evalcore.core import storage
from evalcore.runconfig.config import RunConfig
from evalcore.datasets.base import DATASETS
from evalcore.core.errors import TRANSIENT
from evalcore.judges.base import JUDGES
from evalcore.models.base import MODELS

log = logging.getLogger("evalcore")

#: the error tag of a decode that did not find a local file on a node other than the driver's
NOT_VISIBLE = "not_visible"


@dataclass(frozen=True)
class Nodes:
    """The cluster as the driver sees it at the start of a run."""

    alive: int  #: nodes alive
    driver: str  #: the driver's node id
    driver_cpus: float  #: CPUs the driver's node offers

    @property
    def spread(self) -> bool:
        """Whether work may run on a node other than the driver's (which sees none of its local files)."""
        return self.alive > 1 or self.driver_cpus <= 0

    def describe(self) -> str:
        extra = "" if self.driver_cpus > 0 else ", the driver's node offering no CPU"
        return f"a Ray cluster of {self.alive} node(s){extra}"


def nodes() -> Nodes:
    """The running Ray cluster's :class:`Nodes` (Ray must be initialized)."""
    import ray

    here = ray.get_runtime_context().get_node_id()
    alive = [n for n in ray.nodes() if n.get("Alive")]
    cpus = next((float(n.get("Resources", {}).get("CPU", 0.0)) for n in alive if n.get("NodeID") == here), 0.0)
    return Nodes(alive=len(alive), driver=here, driver_cpus=cpus)


def reachable(uri: str, shared: Iterable[str] | None) -> bool:
    """Whether every node reaches ``uri``: an ``s3://`` URI, or a local path under a shared mount."""
    if storage.is_s3(uri):
        return True
    return any(storage.within(uri, root) for root in shared or ())


def _hint(shared: list[str] | None) -> str:
    mounts = f" (now {', '.join(shared)})" if shared else ""
    return (f"every node reads it, and the cluster's nodes share no disk: put it on s3://, or under a path mounted on "
            f"every node and listed in storage.shared_paths{mounts}")


def _paths(cls: type, params: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(param name, local path or URI) of every configured file the class declares (``path_params``)."""
    for name in getattr(cls, "path_params", {}):
        values = params.get(name)
        for i, v in enumerate(values if isinstance(values, (list, tuple)) else [values]):
            if isinstance(v, str) and v:
                yield (f"{name}.{i}" if isinstance(values, (list, tuple)) else name), v


def _llm_roots(registry: Any, kind: str, params: dict[str, Any]) -> Iterator[tuple[str, str]]:
    if getattr(registry.get(kind), "llm_backed", False):
        for name in ("cache_root", "log_root"):
            if params.get(name):
                yield name, params[name]


def worker_files(cfg: RunConfig) -> Iterator[tuple[str, str]]:
    """(config field, local path or URI) of every file a worker on any node reads or writes, but audio: checkpoints,
    judges' files, free-form metrics' model files, LLM caches and logs (``cfg`` with the run's LLM roots filled in,
    :func:`evalcore.pipeline.llm_resources.with_run_llm_roots`)."""
    for i, m in enumerate(cfg.models):
        for name, uri in [*_paths(MODELS.get(m.kind), m.params), *_llm_roots(MODELS, m.kind, m.params)]:
            yield f"models.{i}.params.{name}", uri
    for i, p in enumerate(cfg.protocols):
        for field in ("judge", "agreement_judge"):
            j = getattr(p, field)
            if j is not None:
                for name, uri in [*_paths(JUDGES.get(j.kind), j.params), *_llm_roots(JUDGES, j.kind, j.params)]:
                    yield f"protocols.{i}.{field}.params.{name}", uri
        if p.kind_spec.text_metrics:
            metrics = p.freeform_metrics()
            for name in metrics.names:
                settings = metrics.settings(name)
                if settings is not None:
                    for field, uri in _paths(type(settings), settings.model_dump()):
                        yield f"protocols.{i}.metrics.{name}.{field}", uri


def config_problems(cfg: RunConfig, at: Nodes) -> list[str]:
    """One line per file of :func:`worker_files` that not every node of ``at`` reaches (none when it is not
    :attr:`Nodes.spread`). An LLM cache or log left to its default lies under the run root: the line says so."""
    if not at.spread:
        return []
    shared = cfg.storage.shared_paths
    out = []
    for field, uri in worker_files(cfg):
        if not reachable(uri, shared):
            default = " (the run root, by default)" if uri == cfg.root else ""
            out.append(f"{field}: {uri}{default} is a local path on {at.describe()}: {_hint(shared)}")
    return out


def audio_problems(cfg: RunConfig, items: pa.Table, at: Nodes, noun: str = "item(s) name audio") -> list[str]:
    """One line per dataset whose items name audio that not every node of ``at`` reaches: how many, the first, and
    what to do (none when it is not :attr:`Nodes.spread`). ``items``: the run's items (``dataset``,
    ``audio_uri``)."""
    if not at.spread or items.num_rows == 0:
        return []
    shared = cfg.storage.shared_paths
    uris = items.column("audio_uri").to_pylist()
    where = {d.name: i for i, d in enumerate(cfg.datasets)}
    local: Counter[str] = Counter()
    first: dict[str, str] = {}
    for dataset, uri in zip(items.column("dataset").to_pylist(), uris):
        if uri and not reachable(uri, shared):
            local[dataset] += 1
            first.setdefault(dataset, uri)
    out = []
    for dataset, n in sorted(local.items(), key=lambda kv: where.get(kv[0], 0)):
        i = where.get(dataset)
        hint = _hint(shared)
        if i is not None and cfg.datasets[i].kind == "synthetic" and not cfg.datasets[i].params.get("audio_dir"):
            hint += "; the synthetic dataset writes its clips under the run root: give --out an s3:// URI, or its " \
                    "audio_dir param"
        field = f"datasets.{i}" if i is not None else f"dataset {dataset!r}"
        out.append(f"{field}: {n} {noun} on a local path (e.g. {first[dataset]}) on {at.describe()}: "
                   f"{hint}")
    return out


def dataset_audio(cfg: RunConfig) -> Iterator[tuple[str, str, str]]:
    """(dataset name, config field, audio URI) of the audio each dataset will name, from its params alone, nothing
    built (``evalcore validate``): where a synthesizing dataset writes its clips (``audio_home``), each row of an items
    file (``audio_uris``), else a configured ``audio_root``."""
    for i, d in enumerate(cfg.datasets):
        cls = DATASETS.get(d.kind)
        if callable(home := getattr(cls, "audio_home", None)):
            yield d.name, f"datasets.{i}", home(d.params, cfg.root)
        elif callable(rows := getattr(cls, "audio_uris", None)):
            try:
                for _, _, uri in rows(d.params):
                    yield d.name, f"datasets.{i}", uri
            except OSError:
                continue  # the items file itself: the preflight names it
        elif isinstance(d.params.get("audio_root"), str):
            yield d.name, f"datasets.{i}.params.audio_root", d.params["audio_root"]


def validate_problems(cfg: RunConfig, at: Nodes) -> list[str]:
    """``evalcore validate`` on a cluster: :func:`config_problems`, and the audio of :func:`dataset_audio` that not
    every node reaches, one line per dataset."""
    if not at.spread:
        return []
    uris = [(name, field, uri) for name, field, uri in dataset_audio(cfg)]
    table = pa.table({"dataset": [n for n, _, _ in uris], "audio_uri": [u for _, _, u in uris]})
    return config_problems(cfg, at) + audio_problems(cfg, table, at, "audio path(s) it names are")


def _exists(paths: list[str]) -> list[bool]:
    import os

    return [os.path.exists(p) for p in paths]


def elsewhere(batch: pa.Table, driver_node: str, this_node: str | None = None) -> pa.Table:
    """The decode stage's output with each ``missing`` local file on this node, when it is not the driver's and the
    driver's node has it, told as such: the row says which node did not see it, and is of class transient
    (``--resume`` reads it again once that node mounts it), not a bad input. Whether the driver's node has it is
    asked of it (a task pinned there), for the missing files only. ``this_node``: default, this process's node."""
    if batch.num_rows == 0 or "error" not in batch.column_names:
        return batch
    errors = batch.column("error")
    missing = pc.fill_null(pc.starts_with(errors, "missing:"), False)
    if not pc.any(missing).as_py():
        return batch
    import ray

    here = this_node or ray.get_runtime_context().get_node_id()
    if here == driver_node:
        return batch
    uris = batch.column("audio_uri").to_pylist()
    local = sorted({u for u, hit in zip(uris, missing.to_pylist()) if hit and u and not storage.is_s3(u)})
    if not local:
        return batch
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    there = ray.remote(num_cpus=0)(_exists).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(driver_node, soft=False))
    try:
        seen = {p for p, ok in zip(local, ray.get(there.remote([storage.resolve(p)[1] for p in local]), timeout=60))
                if ok}
    except Exception:  # noqa: BLE001 - the driver's node could not be asked: the rows stay as they are
        return batch
    if not seen:
        return batch
    ip = next((n.get("NodeManagerAddress", "?") for n in ray.nodes() if n.get("NodeID") == here), "?")
    error, error_class = errors.to_pylist(), batch.column("error_class").to_pylist()
    for i, (uri, hit) in enumerate(zip(uris, missing.to_pylist())):
        if hit and uri in seen:
            error[i] = (f"{NOT_VISIBLE}: audio file not found on node {ip} ({here[:12]}), which is not the "
                        f"driver's node, where it is: {uri} must be on a path every node mounts "
                        "(storage.shared_paths) or on s3://")
            error_class[i] = TRANSIENT
    # the other columns as they are (the decoded audio, shared between rows, is not rebuilt)
    for name, values in (("error", error), ("error_class", error_class)):
        i = batch.schema.get_field_index(name)
        batch = batch.set_column(i, batch.schema.field(i), pa.array(values, type=batch.schema.field(i).type))
    return batch


class NodeWatch:
    """Says once, as a warning, each node that leaves the cluster while the run streams (polled at most every
    ``every_s`` seconds): its actors restart and its tasks run again on the nodes left, which a user should know
    (the run is slower, and a node lost once may be lost again)."""

    def __init__(self, every_s: float = 5.0, clock: Any = None, alive: Any = None) -> None:
        import time

        self.every_s = every_s
        self.clock = clock or time.monotonic
        self._alive = alive or self._ray_alive  #: node id → its address, of the nodes alive now
        self.seen = self._alive()
        self.lost: list[str] = []
        self._last = self.clock()

    @staticmethod
    def _ray_alive() -> dict[str, str]:
        import ray

        return {n["NodeID"]: n.get("NodeManagerAddress", "?") for n in ray.nodes() if n.get("Alive")}

    def poll(self, now_or_never: bool = False) -> None:
        """Look at the cluster's nodes if ``every_s`` passed since the last look (or ``now_or_never``: the stream's end)."""
        now = self.clock()
        if now - self._last < self.every_s and not now_or_never:
            return
        self._last = now
        alive = self._alive()
        for node, ip in self.seen.items():
            if node not in alive and node not in self.lost:
                self.lost.append(node)
                log.warning("cluster: node %s (%s) left during the run; its actors restart and its tasks run again "
                            "on the nodes left", ip, node[:12])
        self.seen.update(alive)
