"""Config mistakes fail fast with a message naming the field."""

import copy
import subprocess
import sys

import pytest
import yaml

from evalcore.runconfig.config import ConfigError, demo_config_path, load_config, parse_config

BASE = yaml.safe_load(demo_config_path().read_text())


def _with(path, value):
    data = copy.deepcopy(BASE)
    node = data
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return data


def test_demo_config_is_valid():
    cfg = load_config(demo_config_path())
    assert cfg.name == "demo" and cfg.root.endswith("runs/demo")


@pytest.mark.parametrize(
    "path,value,needle",
    [
        (("models", 0, "resources", "batch_size"), 0, "models.0.resources.batch_size"),
        (("models", 0, "resources", "num_gpus"), -1, "models.0.resources.num_gpus"),
        (("models", 1, "kind"), "no_such_model", "models.1.kind"),
        (("datasets", 0, "kind"), "nope", "datasets.0.kind"),
        (("protocols", 0, "name"), "essay", "protocols.0.kind"),  # a name that is no kind needs a kind
        (("protocols", 0, "name"), "bad/name", "protocols.0.name"),
        (("protocols", 0, "kind"), "essay", "protocols.0.kind"),
        (("protocols", 0, "conditions"), ["correct", "loud"], "protocols.0.conditions.1"),
        (("protocols", 0, "conditions"), ["random"], "protocols.0"),
        (("protocols", 0, "judge"), {"kind": "oracle"}, "protocols.0.judge.kind"),
        (("protocols", 1, "option_orders"), 0, "protocols.1.option_orders"),
        (("protocols", 1, "variants"), {"x": "{question} {answer}"}, "protocols.1.variants"),
        (("stats", "confidence"), 1.5, "stats.confidence"),
        (("seeds", "bootstrap"), "zero", "seeds.bootstrap"),
        (("name",), "bad name/with slash", "name"),
        (("modelz",), [], "modelz"),
    ],
)
def test_bad_field_is_named(path, value, needle):
    with pytest.raises(ConfigError) as e:
        parse_config(_with(path, value))
    assert needle in str(e.value)


def test_duplicate_model_names():
    data = copy.deepcopy(BASE)
    data["models"][1]["name"] = data["models"][0]["name"]
    with pytest.raises(ConfigError, match="duplicate"):
        parse_config(data)


def test_unknown_dataset_in_protocol():
    with pytest.raises(ConfigError, match="protocols.0.datasets"):
        parse_config(_with(("protocols", 0, "datasets"), ["missing"]))


def test_not_yaml_and_missing_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("name: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML") as e:
        load_config(p)
    assert f'in "{p}", line 1' in str(e.value) and "<unicode string>" not in str(e.value)  # YAML's mark names it
    p.write_bytes(b"name: caf\xe9\n")  # Latin-1, not UTF-8
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_config(p)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml")
    p.write_text("- a list")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(p)


@pytest.mark.e2e  # `evalcore run` in a subprocess
def test_cli_exits_nonzero_naming_the_field(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(_with(("models", 0, "resources", "concurrency"), 0)))
    proc = subprocess.run([sys.executable, "-m", "evalcore.cli", "run", str(p)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "models.0.resources.concurrency" in proc.stderr


def test_a_missing_kind_lists_the_known_kinds():
    data = copy.deepcopy(BASE)
    del data["datasets"][0]["kind"], data["models"][0]["kind"]
    data["protocols"][0] = {"name": "mine", "conditions": ["correct"]}  # not named after a kind: kind is needed
    data["protocols"][1]["judge"] = {"params": {}}
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    lines = {ln.split(": ", 1)[0].strip(): ln.split(": ", 1)[1] for ln in str(e.value).splitlines()[1:]}
    prefix = "required field missing; known kinds: "
    assert lines["protocols.0.kind"] == prefix + "binary_choice, factual, freeform, mcq, mir, true_false"
    for where, some in (("datasets.0.kind", "items_file"), ("models.0.kind", "hf_audio_lm"),
                        ("protocols.1.judge.kind", "mcq_string")):
        assert lines[where].startswith(prefix) and some in lines[where].split(", "), lines[where]


def _small() -> dict:
    from pathlib import Path

    return yaml.safe_load((Path(__file__).resolve().parents[1] / "configs" / "small.yaml").read_text())


def _mistake(data: dict) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    return str(e.value)


def test_an_embedder_by_config_and_a_models_column_are_checked_at_once() -> None:
    """``similarity`` (a mir protocol's, a judge's) and ``models[].model`` name their mistakes in one line each;
    unset, neither is written to config.yaml (a config without them dumps, and fingerprints, as before)."""
    base = _small()
    assert all("similarity" not in p for p in parse_config(base).model_dump(mode="json")["protocols"])
    assert all("model" not in m for m in parse_config(base).model_dump(mode="json")["models"])
    d = copy.deepcopy(base)
    d["protocols"].append({"name": "cmi", "kind": "mir", "similarity": {"kind": "gte", "path": "/m"}})
    assert "protocols.2.similarity.kind: Input should be 'sentence_transformers' or 'transformers_mean'" in _mistake(d)
    d["protocols"][-1] = {"name": "mcq2", "kind": "mcq", "similarity": {"kind": "transformers_mean", "path": "/m"}}
    assert "similarity applies to the mir protocol only" in _mistake(d)
    d = copy.deepcopy(base)
    d["protocols"][1]["judge"] = {"kind": "mcq_mmau_pro", "params": {
        "embedder": "bag-of-words", "similarity": {"kind": "transformers_mean", "path": "/m"}}}
    assert "give either embedder ('bag-of-words') or similarity, not both" in _mistake(d)
    d = copy.deepcopy(base)
    d["models"].append({**d["models"][0], "name": "listener-again", "model": d["models"][0]["name"]})
    assert (f"models.{len(d['models']) - 1}.model: 'listener-again' and 'listener' are both model 'listener' and both "
            "answer protocol 'factual'") in _mistake(d)
    d["protocols"][0]["models"] = ["listener"]  # answering different protocols, they are one column of the card
    d["protocols"][1]["models"] = ["listener-again"]
    d["protocols"] = d["protocols"][:2]
    assert parse_config(d).models[-1].model == "listener"
