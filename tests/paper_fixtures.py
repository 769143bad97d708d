"""Tiny copies of the papers' datasets in their released formats, and the rewrite of a ``configs/paper`` config
that points it at them, at weight-free models and at a local OpenAI-compatible server.

:func:`write_data` lays out ``data/`` as ``docs/reproduce.md`` says to download it: MusicQA JSON + audio, FMA
metadata + ``fma_small/<tid[:3]>/<tid>.mp3``, MusicNet metadata + ``train_*``/``test_*`` folders, HumMusQA's Parquet
(string columns, embedded audio) and MuChoMusic's CSV with its released audio layout — a few rows each, clips of
one to three seconds. :func:`localize` keeps a config's datasets, protocols, conditions, orders, templates, judges
and seeds; it only replaces each Music LM by a weight-free one of the same name (``dsp_listener`` / ``text_prior``),
sends LLM calls (judges, rewrite systems) to the local server, swaps the free-form metrics' model files for the
test ones and roots the run in a temporary folder.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from test_fma_musicnet import GENRES_CSV, META_CSV, TRACKS_CSV, _labels
from test_released_layouts import write_hummusqa, write_muchomusic

WEIGHT_FREE = ("dsp_listener", "text_prior")
LLM_BACKED_MODELS = ("reference_rewrite",)


def _tone(path: Path, seconds: float, freq: float, fmt: str = "WAV", sr: int = 16000) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * sr)) / sr
    sf.write(path, (0.2 * np.sin(2 * np.pi * freq * t)).astype(np.float32), sr, format=fmt)


def _musicqa(root: Path, name: str, clips: list[str]) -> None:
    questions = [("Describe the audio", "A calm piano piece in a minor key."),
                 ("What do you hear in the audio?", "Soft piano and strings."),
                 ("What is the tempo of the music?", "The tempo is slow, about 70 BPM.")]
    rows = [{"audio_name": c, "conversation": [{"from": "human", "value": q}, {"from": "gpt", "value": f"{a} ({c})"}]}
            for c in clips for q, a in questions]
    (root / name).write_text(json.dumps(rows))
    for k, c in enumerate(clips):
        _tone(root / "audios" / c, 1.0 + 0.2 * k, 220 + 40 * k)


def write_data(root: Path) -> Path:
    """Every paper's data under ``root/data`` in its released layout; returns ``root``."""
    data = root / "data"
    _musicqa(_mkdir(data / "musicqa"), "EvalMusicQA.json", ["012542.wav", "012543.wav", "012544.wav"])
    _musicqa(data / "musicqa", "FinetuneMusicQA.json", ["mtt-0001.wav", "mtt-0002.wav"])
    meta = _mkdir(data / "fma" / "fma_metadata")
    (meta / "tracks.csv").write_text(TRACKS_CSV)
    (meta / "genres.csv").write_text(GENRES_CSV)
    for k, tid in enumerate((2, 5, 10, 99, 140, 1482, 123456)):
        _tone(data / "fma" / "fma_small" / f"{tid:06d}"[:3] / f"{tid:06d}.mp3", 1.0, 200 + 30 * k, fmt="MP3")
    mn = _mkdir(data / "musicnet")
    (mn / "musicnet_metadata.csv").write_text(META_CSV)
    labels = {"1727": [1, 41, 42, 43, 44], "2186": [41], "2295": [72, 69, 71, 61], "2202": [74, 7],
              "2628": [41, 42, 43]}
    for k, (rid, programs) in enumerate(labels.items()):
        split = "test" if rid == "2202" else "train"
        _mkdir(mn / f"{split}_labels")
        (mn / f"{split}_labels" / f"{rid}.csv").write_text(_labels(programs))
        _tone(mn / f"{split}_data" / f"{rid}.wav", 3.0 if rid == "1727" else 1.5, 300 + 50 * k)
    write_hummusqa(_mkdir(data / "hummusqa") / "test-00000-of-00001.parquet")
    write_muchomusic(data, extra_questions=3)  # seven questions: enough for five in-context examples
    return root


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _paths(node: Any, root: Path) -> Any:
    """Every string naming a file under data/ made absolute under ``root`` (Ray workers run elsewhere)."""
    if isinstance(node, dict):
        return {k: _paths(v, root) for k, v in node.items()}
    if isinstance(node, list):
        return [_paths(v, root) for v in node]
    if isinstance(node, str) and (node == "data" or node.startswith("data/")):
        return str(root / node)
    return node


def _endpoint(params: dict, base_url: str, key_env: str, cache: Path) -> dict:
    return {**params, "base_url": base_url, "api_key_env": key_env, "cache_root": str(cache), "rpm": 100_000,
            "tpm": 100_000_000, "max_retries": 1, "timeout_s": 20}


def localize(cfg: dict, root: Path, out: Path, base_url: str, key_env: str, metric_models: dict) -> dict:
    """A ``configs/paper`` config (as loaded from YAML) pointed at the fixtures (see the module docstring)."""
    cfg = _paths(copy.deepcopy(cfg), root)
    cache = out / "llm-cache"
    models = []
    for m in cfg["models"]:
        if m["kind"] in LLM_BACKED_MODELS:
            models.append({**m, "params": _endpoint(m["params"], base_url, key_env, cache),
                           "resources": {"num_cpus": 0.1, "batch_size": 32}})
        else:  # the paper's Music LM → a weight-free stand-in of the same name (its chunking settings kept)
            models.append({"name": m["name"], "kind": WEIGHT_FREE[sum(map(ord, m["name"])) % 2],
                           "long_audio": m.get("long_audio", "chunk"), "chunk_seconds": m.get("chunk_seconds"),
                           "resources": {"num_cpus": 0.1, "batch_size": 32}})
    cfg["models"] = models
    for p in cfg["protocols"]:
        for field in ("judge", "agreement_judge"):
            j = p.get(field)
            if j and "base_url" in j.get("params", {}):
                p[field] = {**j, "params": _endpoint(j["params"], base_url, key_env, cache)}
        if p.get("metrics"):
            metrics = dict(p["metrics"])
            if "bertscore" in metrics:
                metrics["bertscore"] = metric_models["bertscore"]
            if "clap" in metrics:
                metrics["clap"] = metric_models["clap"]
            p["metrics"] = metrics
    cfg["storage"] = {"root": str(out / "run")}
    cfg["stats"] = {**cfg.get("stats", {}), "bootstrap_resamples": 100}
    cfg["ray"] = {"progress_bars": False, "decode_num_cpus": 0.5}
    return cfg


def llm_answer(messages: list[dict]) -> str:
    """A scripted LLM for every LLM call of the paper configs: label extraction (the lexicon extractor over the
    vocabulary shown), MCQ matching (the letter in the answer) and the two reference rewrites."""
    from evalcore.vocab import Lexicon, extract

    system, user = messages[0]["content"], messages[-1]["content"]
    text = re.search(r'"""\n(.*)\n"""', user, re.DOTALL)
    text = text.group(1) if text else ""
    if "extract labels" in system or "factual keyword extraction" in system:  # evalcore's rules or App. B.1's
        vocab = re.search(r"Vocabulary \(canonical labels\): (.*)\n", user).group(1).split(", ")
        return ", ".join(extract(text, Lexicon(synonyms={v: [] for v in vocab if v}, name="shown")))
    if "multiple-choice" in system:
        m = re.search(r"\b([A-D])\b", text)
        return m.group(1) if m else "none"
    if "Paraphrase" in system:
        return text.lower()
    return text.replace("piano", "trumpet").replace("calm", "frantic")


def trim(cfg: dict, models: list[str], conditions: list[str] | None = None) -> dict:
    """A config with only ``models`` (the others dropped from its model list and every protocol's ``models`` and
    ``templates``) and, given ``conditions``, only those of them in each protocol: the end-to-end test keeps what
    its checks read, not every model and condition the paper ran."""
    cfg = copy.deepcopy(cfg)
    for p in cfg["protocols"] if conditions is not None else ():
        p["conditions"] = [c for c in p.get("conditions") or ["correct"] if c in conditions]
        assert p["conditions"], f"{cfg['name']}: protocol {p['name']} keeps no condition"
    missing = set(models) - {m["name"] for m in cfg["models"]}
    assert not missing, f"{cfg['name']}: no model {sorted(missing)}"
    cfg["models"] = [m for m in cfg["models"] if m["name"] in models]
    for p in cfg["protocols"]:
        if p.get("models"):
            p["models"] = [m for m in p["models"] if m in models]
        if isinstance(p.get("templates"), dict):
            p["templates"] = {k: v for k, v in p["templates"].items() if k == "default" or k in models}
    return cfg


#: run-level sections every paper config must share to be run together
SHARED = ("seeds", "stats", "ray", "storage", "max_error_rate")


def merge(configs: dict[str, dict], name: str = "paper-configs", models_out: dict | None = None
          ) -> tuple[dict, dict[str, dict[str, str]]]:
    """Localized configs as one run: each config's datasets and protocols renamed ``<config>.<name>`` (and its models
    where another config defines the same name differently), each protocol restricted to its own config's datasets
    and models. Returns the config and, per config, its protocol names → their names in the run. The configs must
    agree on seeds and stats (the paper configs do), so nothing a config decides is changed but names."""
    first = next(iter(configs.values()))
    merged: dict = {"name": name, "datasets": [], "models": [], "protocols": [],
                    **{k: first[k] for k in SHARED if k in first}}
    models: dict[str, dict] = {}
    renamed: dict[str, dict[str, str]] = {}
    for stem, cfg in configs.items():
        for k in ("seeds", "stats"):
            assert cfg.get(k) == first.get(k), (stem, k)
        ds = {d["name"]: f"{stem}.{d['name']}" for d in cfg["datasets"]}
        mods = {}
        for m in cfg["models"]:
            same = [n for n, d in models.items() if n.rpartition(".")[2] == m["name"] and d == {**m, "name": n}]
            new = same[0] if same else m["name"] if m["name"] not in models else f"{stem}.{m['name']}"
            models[new] = {**m, "name": new}
            mods[m["name"]] = new
        if models_out is not None:
            models_out[stem] = mods
        merged["datasets"] += [{**d, "name": ds[d["name"]]} for d in cfg["datasets"]]
        renamed[stem] = {}
        for p in cfg["protocols"]:
            q = dict(p, name=f"{stem}.{p['name']}", kind=p.get("kind", p["name"]))
            q["datasets"] = [ds[d] for d in p.get("datasets") or ds]
            q["models"] = [mods[m] for m in p.get("models") or mods]
            if isinstance(p.get("templates"), dict):
                q["templates"] = {("default" if k == "default" else mods[k]): v for k, v in p["templates"].items()}
            merged["protocols"].append(q)
            renamed[stem][p["name"]] = q["name"]
    merged["models"] = list(models.values())
    tables = [k for cfg in configs.values() for k in ([cfg["reproduces"]] if isinstance(cfg.get("reproduces"), str)
                                                      else cfg.get("reproduces") or [])]
    if tables:
        merged["reproduces"] = list(dict.fromkeys(tables))
    return merged, renamed


def published_copy(path: Path, configs: dict[str, dict], renamed: dict[str, dict[str, str]],
                   models: dict[str, dict[str, str]]) -> Path:
    """The published values of the tables the configs reproduce (and their papers' prose), each cell's protocol,
    dataset and model renamed as :func:`merge` renamed them for the config that reproduces it, written to ``path``:
    the merged run's ``published_values``, so its "Beside the paper" section compares what each config computes.
    ``models`` is what :func:`merge` wrote to ``models_out``."""
    import csv
    from dataclasses import replace

    from evalcore.reports.published import ANY, COLUMNS, read
    from evalcore.reports.reproduction import tables_named

    cells, out = read(), {}
    for stem, cfg in configs.items():
        keys = cfg.get("reproduces") or []
        named, prose = tables_named([keys] if isinstance(keys, str) else keys, cells)
        datasets = {d["name"] for d in cfg["datasets"]}
        for c in named + prose:
            if c.protocol != ANY and c.protocol not in renamed[stem] or c.dataset not in datasets:
                assert c.table == "text", f"{stem}: {c.key} names protocol {c.protocol!r} / dataset {c.dataset!r}"
                continue  # a prose number of another config's protocol or dataset
            new = replace(c, protocol=renamed[stem].get(c.protocol, c.protocol), dataset=f"{stem}.{c.dataset}",
                          model=models[stem].get(c.model, c.model))
            out[(new.paper, new.table, *new.summary_key)] = new
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerows([getattr(c, k) for k in COLUMNS] for c in out.values())
    return path
