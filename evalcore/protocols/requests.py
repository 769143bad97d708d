"""Expand items into requests: item × model × condition × prompt variant × option order.

Conditions (what the model hears):
- ``correct``   the item's own audio;
- ``random``    the audio of another clip of the same dataset, by a seeded derangement of its
                distinct audio files (never a clip with itself);
- ``silence`` / ``noise``  zeros / seeded Gaussian noise as long as the item's own excerpt;
- ``text_only`` no audio at all.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from evalcore.config import ModelConfig, ProtocolConfig, RunConfig
from evalcore.protocols.derangement import derange
from evalcore.protocols.prompts import DEFAULT_VARIANTS, option_order, render
from evalcore.protocols.seeding import derive_seed, stable_id
from evalcore.schema import REQUEST_KEY


def _random_partners(items: list[dict], seed: int) -> tuple[dict[tuple[str, str], dict], dict[str, str]]:
    """(dataset, item_id) → the item whose audio the random condition plays; datasets that can't be paired → reason."""
    by_dataset: dict[str, list[dict]] = defaultdict(list)
    for it in items:
        by_dataset[it["dataset"]].append(it)
    partner: dict[tuple[str, str], dict] = {}
    unpairable: dict[str, str] = {}
    for ds, rows in by_dataset.items():
        # the audio identity is (uri, excerpt): two excerpts of one file are different clips
        clip = lambda r: (r["audio_uri"], r["excerpt_start"] or 0.0, r["excerpt_end"] or -1.0)  # noqa: E731
        first_of: dict[tuple, dict] = {}
        for r in rows:
            first_of.setdefault(clip(r), r)
        try:
            pairing = derange(list(first_of), derive_seed("random-audio", seed, ds))
        except ValueError as e:
            unpairable[ds] = str(e)
            continue
        for r in rows:
            partner[(ds, r["item_id"])] = first_of[pairing[clip(r)]]
    return partner, unpairable


def _request(item: dict, model: ModelConfig, condition: str, variant: str, template: str,
             order: int, seeds_options: int) -> dict[str, Any]:
    options = item.get("options")
    presented, correct_index = None, None
    if item["protocol"] == "mcq" and options:
        perm = option_order(len(options), item["item_id"], order, seeds_options)
        presented = [options[i] for i in perm]
        correct_index = perm.index(item["correct_option"])
    row: dict[str, Any] = {
        "dataset": item["dataset"], "item_id": item["item_id"], "protocol": item["protocol"],
        "task": item.get("task"), "model": model.name, "condition": condition, "variant": variant,
        "option_order": order,
        "prompt": render(template, item["question"], presented),
        "audio_uri": item["audio_uri"], "audio_item_id": item["item_id"],
        "excerpt_start": item.get("excerpt_start"), "excerpt_end": item.get("excerpt_end"),
        "reference": item.get("reference"), "labels": item.get("labels"),
        "options": presented, "correct_index": correct_index,
        "category": item.get("category"), "difficulty": item.get("difficulty"),
        "error": None, "error_stage": None,
    }
    row["request_id"] = stable_id(*(row[k] for k in REQUEST_KEY))
    return row


def expand_requests(cfg: RunConfig, items: list[dict]) -> list[dict]:
    """All requests of the run, in item order; requests that cannot be formed carry an error."""
    partner, unpairable = _random_partners(items, cfg.seeds.derangement)
    requests: list[dict] = []
    for proto in cfg.protocols:
        variants = proto.variants or DEFAULT_VARIANTS[proto.name]
        datasets = set(proto.datasets) if proto.datasets is not None else None
        for item in items:
            if item["protocol"] != proto.name or (datasets is not None and item["dataset"] not in datasets):
                continue
            orders = range(proto.option_orders if proto.name == "mcq" else 1)
            for model in cfg.models:
                for condition in proto.conditions:
                    for variant, template in variants.items():
                        for order in orders:
                            requests.append(_apply_condition(
                                _request(item, model, condition, variant, template, order, cfg.seeds.options),
                                condition, partner, unpairable, cfg.seeds.noise))
    return requests


def _apply_condition(req: dict, condition: str, partner: dict, unpairable: dict, noise_seed: int) -> dict:
    if condition == "random":
        other = partner.get((req["dataset"], req["item_id"]))
        if other is None:
            req.update(error=f"random audio: {unpairable.get(req['dataset'], 'no partner')}", error_stage="expand")
        else:
            req.update(audio_uri=other["audio_uri"], audio_item_id=other["item_id"],
                       excerpt_start=other.get("excerpt_start"), excerpt_end=other.get("excerpt_end"))
    elif condition == "noise":
        # one noise draw per item (and order), shared by every model, so models are compared on the same input
        req["seed"] = derive_seed("noise", noise_seed, req["dataset"], req["item_id"], req["option_order"])
    elif condition == "text_only":
        req.update(audio_uri=None, audio_item_id=None, excerpt_start=None, excerpt_end=None)
    return req


def unused_protocols(cfg: RunConfig, items: list[dict]) -> list[ProtocolConfig]:
    """Protocols for which no item exists (reported, not an error)."""
    present = {it["protocol"] for it in items}
    return [p for p in cfg.protocols if p.name not in present]
