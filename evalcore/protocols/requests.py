"""Expand items into requests: item × model × condition × prompt variant × option order.

Conditions (what the model hears, :mod:`evalcore.conditions`): ``correct`` (the item's own audio), ``random``
(another recording of the same dataset, by a seeded derangement of its distinct audio files: never a file with
itself; the partner's own excerpt is played), ``silence`` / ``noise`` (zeros / seeded Gaussian noise as long as the
item's own excerpt), ``text_only`` (no audio at all) and the segments (part of the excerpt). A condition with a
``seed_stream`` gets one seed per clip from the run's ``seeds.noise``, shared by every model and question.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterator

from evalcore.conditions.base import Context, condition as parse_condition
from evalcore.protocols.captions import captions_of_run, lookup, recording
from evalcore.protocols.derangement import derange
from evalcore.protocols.icl import Example, IclPools
from evalcore.protocols.prompts import option_order, render
from evalcore.protocols.spec import ModelSpec, ProtocolSpec, RunSpec
from evalcore.protocols.templates import RELEASED_EXAMPLE, set_for_model
from evalcore.core.errors import INPUT
from evalcore.core.schema import REQUEST_KEY
from evalcore.core.seeding import derive_seed, stable_id
from evalcore.vocab.lexicon import LEXICONS


def _clip(item: dict) -> str:
    """The audio identity of an item: its file, so a random partner is always another recording
    (two excerpts of one track are never paired with each other)."""
    return item["audio_uri"]


def _clips(items: list[dict]) -> dict[str, dict[str, dict]]:
    """dataset → clip → the first item playing that clip (its id names the clip, independent of paths)."""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for it in items:
        out[it["dataset"]].setdefault(_clip(it), it)
    return out


def _random_partners(clips: dict[str, dict[str, dict]], seed: int) -> tuple[dict[tuple, dict], dict[str, str]]:
    """(dataset, clip) → the item whose audio the random condition plays; unpairable datasets → reason."""
    partner: dict[tuple, dict] = {}  # (dataset, clip) → partner item
    unpairable: dict[str, str] = {}
    for ds, first_of in clips.items():
        by_id = {it["item_id"]: it for it in first_of.values()}
        try:  # pair clips by their ids, so the pairing does not depend on where the audio lives
            pairing = derange(list(by_id), derive_seed("random-audio", seed, ds))
        except ValueError as e:
            unpairable[ds] = str(e)
            continue
        for clip, first in first_of.items():
            partner[(ds, clip)] = by_id[pairing[first["item_id"]]]
    return partner, unpairable


def reads(proto: ProtocolSpec, item: dict) -> bool:
    """Whether the protocol instance ``proto`` asks ``item``: the item's ``protocol`` field is the protocol's *kind*
    (an item is an MCQ, factual … question; the config's instances, named freely, choose among them) and the item's
    dataset is one of the instance's ``datasets`` (all when unset). The one rule by which items reach protocol
    instances: requests are expanded by it and a protocol left without items is found by it."""
    return item["protocol"] == proto.kind and (proto.datasets is None or item["dataset"] in proto.datasets)


def vocabulary(proto: ProtocolSpec) -> list[str]:
    """The labels a protocol's {vocabulary} placeholder lists."""
    if isinstance(proto.vocabulary, str):
        return list(LEXICONS[proto.vocabulary].labels)
    return list(proto.vocabulary or [])


def _request(proto: ProtocolSpec, item: dict, model: ModelSpec, condition: str, variant: str, template: Any,
             order: int, seeds_options: int, vocab: list[str], examples: tuple = ()) -> dict[str, Any]:
    options = item.get("options")
    presented, correct_index = None, None
    shown = proto.kind_spec.options  # the item's kind: the instance asks items of its kind only (reads)
    if shown == "shuffled" and options:
        perm = option_order(len(options), item["item_id"], order, seeds_options)
        presented = [options[i] for i in perm]
        correct_index = perm.index(item["correct_option"])
    elif shown == "fixed" and options:
        # derived factual formats keep their seeded order (the question names the labels in it)
        presented, correct_index = list(options), item.get("correct_option")
    row: dict[str, Any] = {
        # the protocol instance's name keys the request (= its kind for a protocol named after its kind, so
        # request ids of such configs do not change); the kind says how it is judged and scored
        "dataset": item["dataset"], "item_id": item["item_id"], "protocol": proto.name, "protocol_kind": proto.kind,
        "task": item.get("task"), "model": model.name, "condition": condition, "variant": variant,
        "option_order": order,
        "prompt": render(template, item["question"], presented, vocab, examples),
        "question": item["question"],
        "audio_uri": item["audio_uri"], "audio_item_id": item["item_id"],
        "excerpt_start": item.get("excerpt_start"), "excerpt_end": item.get("excerpt_end"),
        "reference": item.get("reference"), "labels": item.get("labels"),
        "options": presented, "correct_index": correct_index,
        "category": item.get("category"), "difficulty": item.get("difficulty"),
        "metadata": item.get("metadata"),
        "error": None, "error_stage": None, "error_class": None,
    }
    row["request_id"] = stable_id(*(row[k] for k in REQUEST_KEY))
    return row


@dataclass
class Expansion:
    """What expanding any subset of the items needs to know of all of them (computed once, small): per
    (dataset, clip) the id of the first item playing it (the noise seed) and the partner the random
    condition plays, the datasets that cannot be paired and why, and the ICL example pools (when used)."""

    first_id: dict[tuple[str, str], str]
    partner: dict[tuple[str, str], dict]
    unpairable: dict[str, str]
    pools: IclPools | None = None
    #: descriptions of clips by recording (:func:`evalcore.protocols.captions.recording`) from the run the
    #: config's ``captions`` names (the ``caption`` condition; an item's own ``caption`` field comes first)
    captions: dict[tuple, str] = field(default_factory=dict)
    #: (dataset, item id) → its paraphrases, the first as ``paraphrase_1`` (:mod:`evalcore.pipeline.paraphrases`)
    paraphrases: dict[tuple[str, str], tuple[dict, ...]] = field(default_factory=dict)


def expansion(cfg: RunSpec, items: list[dict],
              paraphrases: dict[tuple[str, str], tuple[dict, ...]] | None = None) -> Expansion:
    """The :class:`Expansion` of ``items`` (every valid item of the run), with the descriptions the config's
    ``captions`` run gives of their recordings when a protocol has the caption condition
    (:class:`~evalcore.protocols.captions.CaptionsUnavailable` when that run gives none) and the ``paraphrases``
    the run made of them."""
    clips = _clips(items)
    partner, unpairable = _random_partners(clips, cfg.seeds.derangement)
    keep = ("audio_uri", "item_id", "excerpt_start", "excerpt_end")
    pools = IclPools(items) if any(any(p.icl_counts()) for p in cfg.protocols) else None
    return Expansion(first_id={(ds, clip): it["item_id"] for ds, by in clips.items() for clip, it in by.items()},
                     partner={k: {f: it.get(f) for f in keep} for k, it in partner.items()},
                     unpairable=unpairable, pools=pools, captions=_captions(cfg, items),
                     paraphrases=dict(paraphrases or {}))


def _captions(cfg: RunSpec, items: list[dict]) -> dict[tuple, str]:
    """The captions run's descriptions of the recordings of ``items`` that have no ``caption`` of their own."""
    src = cfg.captions
    if src is None or not any(parse_condition(c).described for p in cfg.protocols for c in p.conditions):
        return {}
    keys = [recording(it) for it in items if not it.get("caption")]
    return lookup(captions_of_run(src.run, src.model, src.protocol, src.variant), keys) if keys else {}


def expand_requests(cfg: RunSpec, items: list[dict]) -> list[dict]:
    """All requests of the run, in item order; requests that cannot be formed carry an error."""
    return list(iter_requests(cfg, items))


def iter_requests(cfg: RunSpec, items: list[dict], exp: Expansion | None = None,
                  models: set[str] | None = None) -> Iterator[dict]:
    """The requests of ``items`` (all of the run's, or a slice of them with the run's ``exp``), one at a time
    in item order within each protocol; ``models``: only those models' requests. Each request is the same
    (same ``request_id``) whichever slice expands it."""
    exp = exp if exp is not None else expansion(cfg, items)
    for proto in cfg.protocols:
        variants = proto.variants or proto.kind_spec.variants
        vocab = vocabulary(proto)
        chosen = [m for m in cfg.models if (proto.models is None or m.name in proto.models)
                  and (models is None or m.name in models)]
        if not chosen:
            continue
        for item in items:
            if not reads(proto, item):
                continue
            orders = range(proto.option_orders if proto.kind_spec.options == "shuffled" else 1)
            clip = (item["dataset"], _clip(item))
            other = exp.partner.get(clip)
            clip_id = exp.first_id[clip] if item.get("audio_uri") else item["item_id"]  # the item's own clip
            shots = [(k, *_examples(exp.pools, proto, item, k, cfg.seeds.icl)) for k in proto.icl_counts()]
            ctx = Context(other, exp.unpairable.get(item["dataset"]),
                          item.get("caption") or exp.captions.get(recording(item)),
                          exp.paraphrases.get((item["dataset"], item["item_id"])))
            for model in chosen:
                tset = set_for_model(proto.templates, model.name)
                for written in proto.conditions:
                    condition = parse_condition(written)
                    seed = (derive_seed(condition.seed_stream, cfg.seeds.noise, item["dataset"], exp.first_id[clip])
                            if condition.seed_stream else None)
                    asked = condition.asked(item, ctx)  # e.g. a paraphrase of its question and options
                    unasked = asked.pop("_error", None) if asked is not item else None
                    for base, template in ({tset.name: tset} if tset else variants).items():
                        for k, examples, icl_error in shots:
                            variant = proto.icl_variant(base, k)
                            for order in orders:
                                req = _request(proto, asked, model, written, variant, template, order,
                                               cfg.seeds.options, vocab, examples)
                                req["clip_id"] = clip_id
                                if unasked is not None:
                                    req.update(error=unasked[0], error_stage="expand", error_class=unasked[1])
                                if seed is not None:
                                    req["seed"] = seed
                                if icl_error:
                                    req.update(error=icl_error, error_stage="expand", error_class=INPUT)
                                yield condition.expand(req, ctx)


_RELEASED = Example("muchomusic-released-example", RELEASED_EXAMPLE[0], RELEASED_EXAMPLE[1], RELEASED_EXAMPLE[2])


def _examples(pools: IclPools | None, proto: ProtocolSpec, item: dict, k: int,
              seed: int) -> tuple[tuple, str | None]:
    """The item's in-context examples as (question, options, correct index) tuples, or the reason there are none."""
    if not k or not proto.kind_spec.in_context:
        return (), None
    if proto.icl_pool == "released" and k == 1:
        return (RELEASED_EXAMPLE,), None
    if pools is None:
        return (), None
    try:
        if proto.icl_pool == "released":  # MuChoMusic's one fixed list, the released example first
            return tuple(e.as_tuple() for e in pools.fixed(item, k, seed, _RELEASED)), None
        return tuple(e.as_tuple() for e in pools.examples(item, k, seed)), None
    except ValueError as e:
        return (), str(e)


def unused_protocols(cfg: RunSpec, items: list[dict]) -> list[ProtocolSpec]:
    """Protocols for which no item exists (reported, not an error)."""
    present = {it["protocol"] for it in items}
    return [p for p in cfg.protocols if p.kind not in present]
