"""The run's requests as Ray Data sources: read tasks expand slices of the items on the workers.

The driver holds the items and their small :class:`~evalcore.protocols.requests.Expansion` (random-condition
partners, noise seeds, ICL pools), never the list of requests. It makes one streaming pass over them
(:func:`plan_requests`) for the counts, the committed-elsewhere check of a resume and the requests that cannot
be formed; each model's requests to run are then produced by the read tasks of a :class:`RequestSource`, each
expanding a slice of the items with :func:`~evalcore.protocols.requests.iter_requests` — the same requests,
with the same ``request_id`` s, as expanding all items at once — keeping those still to run, sorted so that
requests sharing a clip sit next to each other (a decode batch reads each clip once), in blocks of the
model's batch size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa

from evalcore.core import storage
from evalcore.runconfig.config import ModelConfig, RunConfig
from evalcore.core.errors import INPUT
from evalcore.pipeline.resources import uses_audio
from evalcore.pipeline.stages import requests_table, sound_key
from evalcore.protocols.requests import Expansion, iter_requests
from evalcore.core.schema import REQUEST

TASK_REQUESTS = 4096  # requests a read task expands, about: few tasks, yet enough for a cluster to share
SOUNDS_COUNTED = 100_000  # distinct sounds a model's plan counts exactly: then it estimates (the driver's memory)


def reject_disallowed_audio(requests: list[dict], roots: list[str] | None) -> int:
    """Mark requests whose audio lies outside ``roots`` as error rows ``not_allowed`` (before any read)."""
    n = 0
    for r in requests:
        uri = r.get("audio_uri")
        if roots is not None and r["error"] is None and uri is not None and not storage.within_any(uri, roots):
            r.update(error=f"not_allowed: audio {uri} is outside storage.allowed_audio_roots", error_stage="decode",
                     error_class=INPUT)
            n += 1
    return n


def _checked(cfg: RunConfig, items: Sequence[dict], exp: Expansion, models: set[str] | None = None) -> Iterator[dict]:
    """The requests of ``items``, those whose audio is not allowed marked as error rows."""
    roots = cfg.storage.allowed_audio_roots
    for r in iter_requests(cfg, items, exp, models):
        if roots is not None:
            reject_disallowed_audio([r], roots)
        yield r


@dataclass
class RequestPlan:
    """What one pass over the run's requests found: how many, how many could not be formed (each handed to
    ``on_unformed``), were committed earlier, are judged again on their committed answer, and per model how
    many go to its actors."""

    total: int = 0
    unformed: int = 0
    outside: int = 0
    committed: int = 0
    rejudged: int = 0
    ready: dict[str, int] = field(default_factory=dict)
    #: per model that reads audio, the distinct sounds its requests to run play (:class:`Sounds`): how many of its
    #: requests a decoded block can carry (:func:`evalcore.pipeline.resources.block_requests_for_sounds`)
    sounds: dict[str, int] = field(default_factory=dict)

    @property
    def to_run(self) -> int:
        return sum(self.ready.values())


class Sounds:
    """The distinct sounds among requests (:func:`~evalcore.pipeline.stages.sound_key`), counted exactly up to
    ``most``, then estimated from the share of distinct sounds among the requests counted until then."""

    def __init__(self, most: int = SOUNDS_COUNTED) -> None:
        self.most = most
        self.keys: set[int] = set()
        self.requests = 0
        self.full_at: int | None = None  #: requests counted when the keys reached ``most``

    def add(self, row: dict) -> None:
        self.requests += 1
        if self.full_at is not None:
            return
        key = sound_key(row)
        if key is not None:
            self.keys.add(hash(key))
            if len(self.keys) >= self.most:
                self.full_at = self.requests

    def count(self) -> int:
        if self.full_at is None:
            return len(self.keys)
        return round(len(self.keys) * self.requests / self.full_at)


def plan_requests(cfg: RunConfig, items: Sequence[dict], exp: Expansion, done: set[str] = frozenset(),
                  again: set[str] = frozenset(), on_unformed: Callable[[dict], None] | None = None) -> RequestPlan:
    """One pass over the requests of the run (none kept): the counts of a :class:`RequestPlan`."""
    plan = RequestPlan(ready={m.name: 0 for m in cfg.models})
    sounds = {m.name: Sounds() for m in cfg.models if uses_audio(m)}
    for r in _checked(cfg, items, exp):
        plan.total += 1
        if r["request_id"] in done:
            plan.committed += 1
        elif r["error"] is not None:
            plan.unformed += 1
            plan.outside += str(r["error"]).startswith("not_allowed:")
            if on_unformed is not None:
                on_unformed(r)
        elif r["request_id"] in again:
            plan.rejudged += 1
        else:
            plan.ready[r["model"]] += 1
            if r["model"] in sounds:
                sounds[r["model"]].add(r)
    plan.sounds = {name: s.count() for name, s in sounds.items()}
    return plan


def _sort_key(r: dict) -> tuple:
    return r["audio_uri"] or "", r["excerpt_start"] or 0.0, r["request_id"]


def _read(cfg: RunConfig, items: Any, exp: Any, model: str, skip: Any, block_rows: int) -> Iterator[pa.Table]:
    """One read task: the requests of ``model`` over ``items`` (a slice, or its object reference) that are to
    run, as Arrow blocks."""
    import ray

    items = ray.get(items) if isinstance(items, ray.ObjectRef) else items
    exp = ray.get(exp) if isinstance(exp, ray.ObjectRef) else exp
    skip = ray.get(skip) if isinstance(skip, ray.ObjectRef) else skip
    rows = [r for r in _checked(cfg, items, exp, {model}) if r["error"] is None and r["request_id"] not in skip]
    rows.sort(key=_sort_key)
    for i in range(0, len(rows), block_rows):
        yield requests_table(rows[i:i + block_rows])


def request_source(cfg: RunConfig, items: Sequence[dict], exp: Any, model: ModelConfig, n_ready: int,
                   skip: Any = frozenset(), num_cpus: float = 0.05):
    """The Ray Dataset of ``model``'s requests to run (``n_ready`` of them, from :func:`plan_requests`):
    read tasks over slices of ``items``; ``exp`` and ``skip`` (the ids not to run: committed, or judged
    again) may be object references, fetched once per task. ``num_cpus`` per read task: a light ask, so that the
    reads fit the small CPU share Ray Data reserves per stage on a small node (a read asking the decode's 0.25
    never started for one of four models of 1M requests on 2 CPUs)."""
    import ray.data
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    per_item = max(1.0, n_ready / max(1, len(items)))
    step = max(1, math.ceil(TASK_REQUESTS / per_item))
    block_rows = max(1, model.resources.batch_size)

    def _task(chunk: Any) -> Callable[[], Iterator[pa.Table]]:
        # a named function holding only references: Ray Data names read functions, and a task's items travel
        # through the object store (a read task over 1 MiB is refused a name in Ray 2.60's size check)
        def read_requests() -> Iterator[pa.Table]:
            return _read(cfg, chunk, exp, model.name, skip, block_rows)
        return read_requests

    class Requests(Datasource):
        def estimate_inmemory_data_size(self) -> int | None:
            return None

        def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                           data_context: Any = None) -> list[ReadTask]:
            return [ReadTask(_task(ray.put(items[a:a + step])),
                             BlockMetadata(num_rows=None, size_bytes=None, exec_stats=None, input_files=None),
                             schema=REQUEST)
                    for a in starts]

        def get_name(self) -> str:
            return "requests"

    starts = range(0, len(items), step)
    # as many blocks as read tasks: else Ray Data splits the tasks' output into 200 blocks at least, and a short
    # run's one read task trickled its 200 blocks out over 17 s (360 requests; its work took 2.7 s). The
    # batch alignment after it cuts the blocks the models need.
    return ray.data.read_datasource(Requests(), num_cpus=num_cpus, override_num_blocks=max(1, len(starts)))
