"""docs/config.md's "Every field" block names every field of the run config models, and nothing else: its YAML's
keys (nested mappings and lists of mappings followed; a component's ``params`` and other free-form mappings not)
equal the fields of :class:`evalcore.runconfig.config.RunConfig` and of the config sections it holds, as dotted paths."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel

from evalcore.runconfig.config import RunConfig, _types_in

REPO = Path(__file__).resolve().parents[1]
#: mappings whose keys are the user's own (a component's params, Ray resources, prompt variants, …), not fields
FREE = {"params", "custom", "runtime_env", "variants", "templates"}


def config_fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Dotted paths of every field of ``model`` and of the config sections its fields hold."""
    out = set()
    for name, field in model.model_fields.items():
        out.add(prefix + name)
        for sub in _types_in(field.annotation):
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                out |= config_fields(sub, f"{prefix}{name}.")
    return out


def documented(node: object, prefix: str = "") -> set[str]:
    """Dotted paths of the keys of a YAML document (list items merged)."""
    out: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            out.add(prefix + str(key))
            if key not in FREE:
                out |= documented(value, f"{prefix}{key}.")
    elif isinstance(node, list):
        for item in node:
            out |= documented(item, prefix)
    return out


def every_field_block() -> object:
    text = (REPO / "docs" / "config.md").read_text(encoding="utf-8")
    return yaml.safe_load(text.split("## Every field", 1)[1].split("```yaml", 1)[1].split("```", 1)[0])


def test_every_field_of_the_run_config_is_documented_and_nothing_else() -> None:
    fields, docs = config_fields(RunConfig), documented(every_field_block())
    assert {"ray.decode_num_cpus", "models.resources.max_restarts", "stats.min_items"} <= fields  # the walk works
    assert sorted(fields - docs) == [], "fields missing from docs/config.md's Every field"
    assert sorted(docs - fields) == [], "documented in docs/config.md's Every field, not a field"


def test_the_check_sees_a_missing_field() -> None:
    block = every_field_block()
    del block["ray"]["decode_num_cpus"]
    assert config_fields(RunConfig) - documented(block) == {"ray.decode_num_cpus"}
