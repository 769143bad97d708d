"""The report's run section: where the run's time went, from run.json's ``profile`` (evalcore.pipeline.profile).

Rendered from what run.json holds, so that ``evalcore report`` renders it again unchanged: the report's own stage
and the run's total wall are written to run.json after the report, and are left out here."""

from __future__ import annotations

from typing import Any


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
           "policy kept their input waiting). The report's own stage is in run.json (`profile`).", "",
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
        out += ["", "| model | wall s | actors | busy | answers | answers/s |", "|---|---|---|---|---|---|"]
        out += [f"| {name} | {_cell(m['wall_s'])} | {m['actors']} | {m['busy_fraction']:.0%} | {_cell(m['answers'])} | "
                f"{_cell(m['answers_per_s'])} |" for name, m in models.items()]
    first = profile.get("first_commit")
    if first and first.get("after_model_start_s") is not None:
        out += ["", f"The first shard was committed {first['after_model_start_s']:.1f} s after the model stage "
                    f"started ({first['at_s']:.1f} s into the run)."]
    return out
