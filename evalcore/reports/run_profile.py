"""The report's run section: where the run's time went, from run.json's ``profile`` (evalcore.pipeline.profile).

Rendered from what run.json holds, so that ``evalcore report`` renders it again unchanged: the report's own stage
and the run's total wall are written to run.json after the report, and are left out here."""

from __future__ import annotations

from typing import Any

#: a model whose actors waited for input longer than this share of its stage (wall × actors) gets a sentence
STARVED_NOTE_FRACTION = 0.05


def pace_setter(models: dict[str, dict[str, Any]]) -> str | None:
    """The model that sets the run's pace: the one whose stage lasted longest (its wall); None without models. A
    model that answers faster than the others feed it waits by nature, and saying so would be noise."""
    return max(models, key=lambda m: models[m].get("wall_s") or 0.0) if models else None


def starved_notes(profile: dict[str, Any] | None) -> list[str]:
    """A sentence when the model that sets the run's pace (:func:`pace_setter`) waited for input while work remained
    more than :data:`STARVED_NOTE_FRACTION` of its stage, naming the upstream stage(s) that held it; none otherwise."""
    out = []
    models = (profile or {}).get("models") or {}
    for name, m in models.items():
        if name != pace_setter(models):
            continue
        frac = m.get("starved_fraction")
        if frac is None or frac <= STARVED_NOTE_FRACTION:
            continue
        by = [(k, v) for k, v in (m.get("starved_by") or {}).items() if v > 0]
        held = [(k, v) for k, v in (m.get("starved_held") or {}).items() if v > 0]
        why = ", ".join(f"{k} ({v:,.1f} s)" for k, v in by) or "an upstream stage not identified"
        line = (f"Model {name} waited for input {m['starved_s']:,.1f} s ({frac:.0%} of its stage: "
                f"{m['wall_s']:,.1f} s × {m['actors']} actor(s)) while work remained, held by {why}")
        if held:
            line += "; meanwhile " + ", ".join(f"{k.replace(' by ', ' was held back by ', 1)} {v:,.1f} s"
                                               for k, v in held)
        out.append(line + ".")
    return out


def _cell(v: Any, digits: int = 1) -> str:
    if v is None:
        return "–"
    return f"{v:,.{digits}f}" if isinstance(v, float) else f"{v:,}"


def section(profile: dict[str, Any] | None) -> list[str]:
    """``## Run``: a row per stage (but the report's own), a row per model, when the first shard was committed."""
    if not profile or not profile.get("stages"):
        return []
    out = ["", "## Run", "",
           "Where the time went, stage by stage: seconds from the run's start on the driver's clock; the stages on Ray "
           "from Ray Data's operator stats (busy: the sum of their tasks' time; held back: time a backpressure "
           "policy kept their input waiting; a model's starved: actor-seconds its actors waited for input while work "
           "remained upstream). The report's own stage is in run.json (`profile`).", "",
           "| stage | where | start s | wall s | busy s | held back s | rows in | rows out | first output s |",
           "|---|---|---|---|---|---|---|---|---|"]
    for s in profile["stages"]:
        if s["stage"] == "report":
            continue
        out.append(f"| {s['stage']} | {s['where']} | {_cell(s['start_s'])} | {_cell(s['wall_s'])} | "
                   f"{_cell(s['busy_s'])} | {_cell(s.get('held_s'))} | {_cell(s['rows_in'])} | "
                   f"{_cell(s['rows_out'])} | {_cell(s['first_output_s'])} |")
    models = profile.get("models") or {}
    if models:
        out += ["", "| model | wall s | actors | busy | starved s | answers | answers/s |",
                "|---|---|---|---|---|---|---|"]
        out += [f"| {name} | {_cell(m['wall_s'])} | {m['actors']} | {m['busy_fraction']:.0%} | "
                f"{_cell(m.get('starved_s'))} | {_cell(m['answers'])} | {_cell(m['answers_per_s'])} |"
                for name, m in models.items()]
        notes = starved_notes(profile)
        if notes:
            out += [""] + notes
    first = profile.get("first_commit")
    if first and first.get("after_model_start_s") is not None:
        out += ["", f"The first shard was committed {first['after_model_start_s']:.1f} s after the model stage "
                    f"started ({first['at_s']:.1f} s into the run)."]
    return out
