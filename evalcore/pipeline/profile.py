"""The run's per-stage profile: where the time went, stage by stage, in every run.

For each stage: where it ran (driver or Ray), when it started and ended, and its wall (seconds from the run's start on
the driver's clock; a Ray stage's wall is the union of its operators' spans), its busy time (a Ray stage: the sum of its
tasks' time per output block; the driver's: its wall), rows in and out, when its first output came and, on Ray, how
long a backpressure policy held its task submission back. Per model: the model stage's wall, how busy its actors
were (busy ÷ (wall × actors)) and answers (rows, one per chunk) per second; and how long its actors were *starved*,
waiting for input while work remained upstream (actor-seconds, and as a fraction of wall × actors), with the
upstream stage that held it (``starved_by``: stage → seconds, the most first) and the seconds that stage was itself
held back meanwhile, by a backpressure policy or for want of a CPU (``starved_held``: "<stage> by <policy>" →
seconds; :mod:`evalcore.pipeline.starvation`); and ``output_held_s``, its tasks' seconds with answers ready that Ray
Data did not read, for want of budget in the stages after it (held by downstream, not starved). And when the first
shard was committed, after the model stage started.

Stages in order: ``items`` (read, validate and commit the items), ``requests`` (the driver's one counting pass),
then on Ray ``read`` (read tasks expanding the items into requests), ``align`` (the batch alignment), ``decode``,
``model:<name>``, ``judge``, ``metrics`` (per-request free-form metrics; ``judge+metrics`` where Ray Data fused
them; ``metrics:models`` for BERTScore/CLAPText actors), ``commit`` (the shard-writing tasks,
:mod:`evalcore.pipeline.committer`), then ``score`` (per-item metrics, summary and error tables) and ``report``.
Ray's figures come from its operators' own stats (:mod:`evalcore.pipeline.raydata`). Written to run.json
(``profile``), printed at the end of the run, shown in the report's run section and per checkpoint by the nightly.
A resumed run profiles its own attempt.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Iterator

from evalcore.pipeline.committer import CommitStage
from evalcore.pipeline.raydata import Operator

_RAY_NAMES = {"decode": "decode", "judge": "judge", "score": "metrics", "Scoring": "metrics",
              "ModelScoring": "metrics:models", "commit_batch": "commit"}


@dataclass
class Stage:
    stage: str
    where: str  #: driver | ray
    start_s: float | None
    wall_s: float
    busy_s: float
    rows_in: int | None
    rows_out: int | None
    first_output_s: float | None
    held_s: float | None = None
    tasks: int | None = None
    end_s: float | None = None
    starved_s: float | None = None  #: an actor pool's: actor-seconds waiting for input while work remained upstream


def stage_name(ray_name: str) -> str | None:
    """The profile's stage for a Ray Data operator name (``None``: not a stage, e.g. a union)."""
    parts = []
    for part in ray_name.split("->"):
        if part.startswith("Read"):
            parts.append("read")
        elif part.startswith("StreamingRepartition") or part.startswith("Repartition"):
            parts.append("align")
        elif part.startswith("MapBatches(") and part.endswith(")"):
            inner = part[len("MapBatches("):-1]
            parts.append(inner if inner.startswith("model:") else _RAY_NAMES.get(inner, inner))
        elif part.startswith("Union"):
            continue
        else:
            parts.append(part)
    return "+".join(parts) or None


def _stage_of(op_name: str) -> str:
    """The profile's stage of an upstream operator a model waited on (its Ray name when it is none)."""
    return stage_name(op_name) or op_name


def _add(into: dict[str, float], key: str, v: float) -> None:
    into[key] = round(into.get(key, 0.0) + v, 3)


def _most_first(d: dict[str, float]) -> dict[str, float]:
    return dict(sorted(((k, round(v, 3)) for k, v in d.items()), key=lambda kv: (-kv[1], kv[0])))


def _union_length(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, None
    for a, b in sorted(spans):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


class Profile:
    """Collects the stages of one run attempt (see the module docstring)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.stages: list[Stage] = []
        self.models: dict[str, dict[str, Any]] = {}
        self.first_commit_s: float | None = None
        self.nodes_lost: list[str] = []  #: Ray nodes that left the cluster while the run streamed (their ids)

    def _at(self, t: float) -> float:
        return round(t - self.t0, 3)

    @contextmanager
    def driver(self, name: str) -> Iterator[dict[str, int | None]]:
        """Time a driver stage; the caller sets ``rows_in`` / ``rows_out`` in the dict it gets."""
        rows: dict[str, int | None] = {"rows_in": None, "rows_out": None}
        t = time.perf_counter()
        try:
            yield rows
        finally:
            took = time.perf_counter() - t
            self.stages.append(Stage(name, "driver", self._at(t), round(took, 3), round(took, 3), rows["rows_in"],
                                     rows["rows_out"], self._at(t + took), end_s=self._at(t + took)))

    def add_operators(self, operators: list[Operator], offsets: dict[str, float],
                      actors: dict[str, int] | None = None) -> None:
        """The stages of executed Ray Data operators (several executions add up: a stage's wall is the union of
        its operators' spans). ``offsets``: node → wall minus monotonic time there (:func:`raydata.node_offsets`);
        ``actors``: model name → its actor pool's size."""
        here = time.time() - time.perf_counter()
        by_stage: dict[str, list[Operator]] = {}
        for op in operators:
            name = stage_name(op.name)
            if name is not None:
                by_stage.setdefault(name, []).append(op)
        for name, ops in by_stage.items():
            spans, ends = [], []
            for op in ops:
                mine = [(s + offsets[n] - here, e + offsets[n] - here) for n, s, e in op.spans if n in offsets]
                if mine:
                    spans.append((min(s for s, _ in mine), max(e for _, e in mine)))
                    ends.append(min(e for _, e in mine))
            # a read's inputs are its read tasks, not rows
            rows_in = [None if name.startswith("read") else op.rows_in for op in ops]
            by: dict[str, float] = {}
            held: dict[str, float] = {}
            for op in ops:
                for k, v in op.starved_by.items():
                    _add(by, _stage_of(k), v)
                for k, v in op.starved_held.items():
                    up, _, policy = k.partition(" by ")
                    _add(held, f"{_stage_of(up)} by {policy}", v)
            stage = Stage(name, "ray", self._at(min(s for s, _ in spans)) if spans else None,
                          round(_union_length(spans), 3), round(sum(op.busy_s for op in ops), 3),
                          sum(rows_in) if None not in rows_in else None, sum(op.rows_out for op in ops),
                          self._at(min(ends)) if ends else None, round(sum(op.held_s for op in ops), 3),
                          sum(op.tasks for op in ops), self._at(max(e for _, e in spans)) if spans else None,
                          round(sum(op.starved_s for op in ops), 3) if name.startswith("model:") else None)
            self._put(stage)
            if name.startswith("model:") and stage.wall_s > 0:
                model = name[len("model:"):]
                n = (actors or {}).get(model, 1)
                old = self.models.get(model)  # another group's execution of the same model: add up
                if old is not None:
                    by = {k: by.get(k, 0.0) + old["starved_by"].get(k, 0.0) for k in {*by, *old["starved_by"]}}
                    held = {k: held.get(k, 0.0) + old["starved_held"].get(k, 0.0)
                            for k in {*held, *old["starved_held"]}}
                out_held = sum(op.output_held_s for op in ops) + (old or {}).get("output_held_s", 0.0)
                whole = next(s for s in self.stages if s.stage == name)
                starved = whole.starved_s or 0.0
                self.models[model] = {
                    "wall_s": whole.wall_s, "busy_s": whole.busy_s, "actors": n,
                    "busy_fraction": round(min(1.0, whole.busy_s / (whole.wall_s * n)), 3),
                    "answers": whole.rows_out, "answers_per_s": round((whole.rows_out or 0) / whole.wall_s, 2),
                    "starved_s": round(starved, 3),
                    "starved_fraction": round(min(1.0, starved / (whole.wall_s * n)), 3),
                    "starved_by": _most_first(by), "starved_held": _most_first(held),
                    "output_held_s": round(out_held, 3)}

    def add_commit(self, c: CommitStage, rows_out: int) -> None:
        """The commit stage (:class:`committer.CommitStage`); ``rows_out``: the rows committed in all (the tasks'
        and the driver's, for requests whose chunks came in different commits)."""
        if c.started is None:
            return
        end = c.last_done if c.last_done is not None else c.started
        self._put(Stage("commit", "ray", self._at(c.started), round(end - c.started, 3), round(c.busy_s, 3),
                        c.rows_in, rows_out, self._at(c.first_done) if c.first_done is not None else None,
                        tasks=c.tasks, end_s=self._at(end)))
        if c.first_done is not None:
            self.first_commit_s = self._at(c.first_done)

    def _put(self, stage: Stage) -> None:
        """Add ``stage``, or add it up with the stage of that name already there (another group of models)."""
        old = next((s for s in self.stages if s.stage == stage.stage), None)
        if old is None:
            self.stages.append(stage)
            return
        starts = [x for x in (old.start_s, stage.start_s) if x is not None]
        firsts = [x for x in (old.first_output_s, stage.first_output_s) if x is not None]
        ends = [x for x in (old.end_s, stage.end_s) if x is not None]
        old.start_s = min(starts) if starts else None
        old.first_output_s = min(firsts) if firsts else None
        old.end_s = max(ends) if ends else None
        old.wall_s = round(old.wall_s + stage.wall_s, 3)  # groups run one after the other
        old.busy_s = round(old.busy_s + stage.busy_s, 3)
        old.rows_in = None if old.rows_in is None or stage.rows_in is None else old.rows_in + stage.rows_in
        old.rows_out = None if old.rows_out is None or stage.rows_out is None else old.rows_out + stage.rows_out
        old.held_s = round((old.held_s or 0.0) + (stage.held_s or 0.0), 3)
        old.tasks = (old.tasks or 0) + (stage.tasks or 0)
        if stage.starved_s is not None:
            old.starved_s = round((old.starved_s or 0.0) + stage.starved_s, 3)

    def as_json(self) -> dict[str, Any]:
        """run.json's ``profile``."""
        model_start = min((s.start_s for s in self.stages if s.stage.startswith("model:") and s.start_s is not None),
                          default=None)
        first = None
        if self.first_commit_s is not None:
            first = {"at_s": self.first_commit_s, "model_start_s": model_start,
                     "after_model_start_s": (round(self.first_commit_s - model_start, 3)
                                             if model_start is not None else None)}
        return {"clock": "seconds from the run's start, the driver's clock",
                "wall_s": round(time.perf_counter() - self.t0, 3),
                "stages": [asdict(s) for s in self.stages], "models": dict(self.models), "first_commit": first,
                "nodes_lost": list(self.nodes_lost)}
