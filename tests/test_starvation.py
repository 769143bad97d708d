"""Starved seconds (evalcore.pipeline.starvation): which upstream operator a waiting model is charged to, and the
report's and console's sentence, said only past 5 % of the model's stage. The live count on a run whose decode is
slow on purpose: tests/test_models_simulated.py."""

from __future__ import annotations

import types

from evalcore.reports.console import profile_lines
from evalcore.pipeline import starvation
from evalcore.reports.run_profile import section, starved_notes


class _Op(types.SimpleNamespace):
    __hash__ = object.__hash__  # a topology's key, as Ray Data's operators are


def _op(name: str, ups=(), active: int = 0, done: bool = False, policy: str | None = None):
    return _Op(name=name, input_dependencies=list(ups), num_active_tasks=lambda: active, has_completed=lambda: done,
               _in_task_submission_backpressure=policy is not None, _task_submission_backpressure_policy=policy)


def _topology(queued: dict):
    return {op: types.SimpleNamespace(total_enqueued_input_blocks=lambda n=n: n, total_enqueued_output_blocks=lambda: 0)
            for op, n in queued.items()}


def test_the_wait_is_charged_to_the_first_upstream_operator_at_work_or_held_back():
    read = _op("ReadItems", active=1)
    align = _op("StreamingRepartition", [read])
    decode = _op("MapBatches(decode)", [align])
    model = _op("MapBatches(model:m)", [decode])
    topo = _topology({read: 0, align: 0, decode: 0, model: 0})
    assert starvation.holder(topo, model) == ("ReadItems", None)  # decode and align idle, nothing queued: the read
    busy = _op("MapBatches(decode)", [align], active=2)
    assert starvation.holder(_topology({read: 0, align: 0, busy: 0}), _op("m", [busy])) == ("MapBatches(decode)", None)
    held = _op("MapBatches(decode)", [align], active=1, policy="ResourceBudget")
    assert starvation.holder(_topology({read: 0, align: 0, held: 3}), _op("m", [held])) == (
        "MapBatches(decode)", "MapBatches(decode) by ResourceBudget")
    waiting = _op("MapBatches(decode)", [align])  # input queued, nothing running, no policy: no CPU was free
    assert starvation.holder(_topology({read: 0, align: 0, waiting: 2}), _op("m", [waiting]))[1] == \
        "MapBatches(decode) by CPUs"
    assert starvation.remains_upstream(topo, model)
    done = _op("d", done=True)
    assert not starvation.remains_upstream(_topology({done: 0}), _op("m", [done]))


def _profile(starved: float) -> dict:
    return {"wall_s": 12.0, "stages": [
        {"stage": "model:m", "where": "ray", "start_s": 1.0, "wall_s": 10.0, "busy_s": 10.0 - starved, "held_s": 0.0,
         "rows_in": 5, "rows_out": 5, "first_output_s": 2.0, "starved_s": starved}],
        "models": {"m": {"wall_s": 10.0, "busy_s": 10.0 - starved, "actors": 1, "busy_fraction": 1 - starved / 10,
                         "answers": 5, "answers_per_s": 0.5, "starved_s": starved, "starved_fraction": starved / 10,
                         "starved_by": {"decode": starved * 0.8, "align": starved * 0.2},
                         "starved_held": {"decode by ResourceBudget": starved / 2}}}}


def test_a_model_that_waited_over_5_percent_is_named_with_what_held_it_and_quiet_otherwise():
    (note,) = starved_notes(_profile(3.0))
    assert note.startswith("Model m waited for input 3.0 s (30% of its stage: 10.0 s × 1 actor(s))"), note
    assert "held by decode (2.4 s), align (0.6 s)" in note and "decode was held back by ResourceBudget 1.5 s" in note
    assert note in section(_profile(3.0)) and f"profile: {note}" in profile_lines(_profile(3.0))
    assert "| m | 10.0 | 1 | 70% | 3.0 | 5 | 0.5 |" in section(_profile(3.0))
    assert starved_notes(_profile(0.4)) == []  # 4 %: quiet
    assert not any("Model m waited" in x for x in section(_profile(0.4)) + profile_lines(_profile(0.4)))
    assert starved_notes({"models": {"m": {"wall_s": 1.0}}}) == []  # a profile from before starved seconds


def test_only_the_model_that_sets_the_pace_is_said_to_wait():
    """A model faster than what feeds it waits by nature: a second model with a shorter stage, starved 80 % of it,
    gets no sentence; the pace-setting model's 30 % does."""
    profile = _profile(3.0)
    profile["models"]["quick"] = {**profile["models"]["m"], "wall_s": 2.0, "busy_s": 0.2, "starved_s": 1.6,
                                  "starved_fraction": 0.8}
    notes = starved_notes(profile)
    assert len(notes) == 1 and notes[0].startswith("Model m waited")
    profile["models"]["quick"]["wall_s"] = 20.0  # now it is the one the run waits for
    assert [n.split()[1] for n in starved_notes(profile)] == ["quick"]
