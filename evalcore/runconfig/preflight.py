"""What can be checked of a parsed run config before any model runs, without loading weights.

``parse_config`` already checks every field, every component's ``params`` against the schema its
class declares (:mod:`evalcore.core.params`), vocabulary names and prompt placeholders. This adds, even without
``check_paths``, what needs the protocols and the registered datasets (:func:`config_problems`): each configured
vocabulary fits the factual tasks its protocol's datasets declare and each named prompt template set exists;
and what lies outside the config: configured files and ``s3://`` objects
exist, a checkpoint directory holds a config its backend recognises, the free-form metrics' tools and model
files are there, and each model's, judge's and metric's packages import where it will run
(:mod:`evalcore.core.packages`).
``evalcore validate`` and ``evalcore run`` (before Ray starts) both call :func:`check`; ``evalcore validate`` also
checks that the audio file each item row names exists (:func:`audio_problems`: a run makes a missing one that
row's error, not a refusal); it also names an
endpoint model's or LLM judge's ``api_key_env`` whose variable is not set. :func:`check_endpoints` makes one
cheap call to each endpoint (``evalcore validate --ping``; ``evalcore run`` unless ``--no-ping``).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Iterator

from evalcore.protocols.captions import CaptionsUnavailable, captions_of_run
from evalcore.core import storage
from evalcore.runconfig.config import ConfigError, ProtocolConfig, RunConfig
from evalcore.datasets.base import DATASETS
from evalcore.datasets.base import DatasetContext
from evalcore.datasets.validate import validated
from evalcore.core.embedders import EmbedderSpec, path_problem, requires
from evalcore.core.errors import bounded
from evalcore.judges.base import JUDGES
from evalcore.models.base import MODELS
from evalcore.core.packages import CORE, METRICS_EXTRA, component_problem, missing
from evalcore.core.params import path_problems
from evalcore.protocols.requests import expansion, iter_requests
from evalcore.protocols.templates import check_templates
from evalcore.core.registry import Registry
from evalcore.reports import model_card, published
from evalcore.scorers.freeform import preflight as metric_problems
from evalcore.scorers.mir import REQUIRES as MIR_REQUIRES
from evalcore.vocab.tasks import misfit
from evalcore.runconfig.vocab_fit import declared


#: the registry of each kind of configured component
_REGISTRIES: dict[str, Registry[Any]] = {"datasets": DATASETS, "models": MODELS, "judges": JUDGES}


def _components(cfg: RunConfig) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(config path, registry package, kind, params) of every configured dataset, model and judge."""
    for i, d in enumerate(cfg.datasets):
        yield f"datasets.{i}.params", "datasets", d.kind, d.params
    for i, m in enumerate(cfg.models):
        yield f"models.{i}.params", "models", m.kind, m.params
    for i, p in enumerate(cfg.protocols):
        for field in ("judge", "agreement_judge"):
            j = getattr(p, field)
            if j is not None:
                yield f"protocols.{i}.{field}.params", "judges", j.kind, j.params


def _endpoints(cfg: RunConfig) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(params path, who, params) of every configured component that calls an LLM endpoint (``llm_backed``)."""
    names = [f"model {m.name!r}" for m in cfg.models]
    for where, package, kind, params in _components(cfg):
        if package != "datasets" and getattr(_REGISTRIES[package].get(kind), "llm_backed", False):
            parts = where.split(".")
            who = (names[int(parts[1])] if package == "models"
                   else f"{parts[2]} {kind} of protocol {cfg.protocols[int(parts[1])].name!r}")
            yield where, who, params


def key_problems(cfg: RunConfig) -> list[str]:
    """One line per endpoint whose ``api_key_env`` names a variable that is not set (never its value)."""
    out = []
    for where, who, params in _endpoints(cfg):
        env = params.get("api_key_env", "OPENAI_API_KEY")
        if not os.environ.get(env):
            out.append(f"{where}.api_key_env: environment variable {env} is not set ({who})")
    return out


def endpoint_problems(cfg: RunConfig) -> list[str]:
    """One line per endpoint that is unreachable, refuses its key or does not serve its model
    (:func:`evalcore.llm.ping.ping`, one call per distinct endpoint, model and key variable)."""
    from evalcore.llm.ping import PING_TIMEOUT_S, ping  # heavy: evalcore.llm pulls openai (a second under --help)

    seen: dict[tuple, tuple[str, str] | None] = {}
    out = []
    for where, who, params in _endpoints(cfg):
        key = (params.get("base_url"), params.get("model"), params.get("api_key_env", "OPENAI_API_KEY"))
        if key not in seen:
            seen[key] = ping(*key, timeout_s=float(params.get("timeout_s", PING_TIMEOUT_S)))  # type: ignore[arg-type]
        if (found := seen[key]) is not None:
            out.append(f"{where}.{found[0]}: {who}: {found[1]}")
    return out


def check_endpoints(cfg: RunConfig) -> None:
    """Raise :class:`ConfigError` listing every endpoint :func:`endpoint_problems` finds unusable."""
    found = endpoint_problems(cfg)
    if found:
        raise ConfigError("endpoint check failed (evalcore run --no-ping skips it):\n"
                          + "\n".join(f"  {line}" for line in found))


@storage.scoped(lambda cfg, *_, **__: cfg.storage.settings())  # files and objects reached as the run reaches them
def problems(cfg: RunConfig, check_paths: bool = True, datasets: bool = True) -> list[str]:
    """One ``<field>: <reason>`` line per problem. ``check_paths=False`` skips everything that depends on this
    machine or store (files, ``s3://`` objects, checkpoints, the free-form metrics' WordNet, Java and model
    files, API key variables, packages); ``datasets=False`` leaves the datasets' files out (a resumed run reads
    its committed items)."""
    out = config_problems(cfg) + reproduction_problems(cfg)
    if not check_paths:
        return out
    out += key_problems(cfg) + card_problems(cfg) + embedder_problems(cfg) + caption_problems(cfg)
    out += [msg for i, p in enumerate(cfg.protocols) if p.kind_spec.text_metrics
           for msg in metric_problems(p.freeform_metrics(), f"protocols.{i}.metrics")]

    for where, package, kind, params in _components(cfg):
        if package == "datasets" and not datasets:
            continue
        cls = _REGISTRIES[package].get(kind)
        out += [f"{where}.{f}: {m}" if f else f"{where}: {m}" for f, m in path_problems(cls, params)]
    if not out:  # what the engine will refuse, read from files that exist
        out += placement_problems(cfg) + (prompt_problems(cfg) if datasets else [])
    return package_problems(cfg) + out


def caption_problems(cfg: RunConfig) -> list[str]:
    """The config's ``captions`` run, read as the caption condition will read it: a run that is not there, or holds
    no answer of the named model to a free-form protocol, is one line naming ``captions``."""
    if cfg.captions is None:
        return []
    src = cfg.captions
    try:
        captions_of_run(src.run, src.model, src.protocol, src.variant)
    except CaptionsUnavailable as e:
        return [f"captions: {e}"]
    return []


def placement_problems(cfg: RunConfig) -> list[str]:
    """One line per model its backend cannot run where it is placed (``placement_problem(params, num_gpus)``, e.g.
    ``vllm_audio_lm``'s decoder head size on an engine without a GPU)."""
    out = []
    for i, m in enumerate(cfg.models):
        hook = getattr(MODELS.get(m.kind), "placement_problem", None)
        if hook is not None and (found := hook(m.params, m.resources.num_gpus)) is not None:
            out.append(f"models.{i}.{found[0]}: model {m.name!r}: {found[1]}")
    return out


def prompt_problems(cfg: RunConfig) -> list[str]:
    """One line per model whose backend refuses the run's longest prompt (``prompt_problem(params, prompts)``, e.g.
    ``vllm_audio_lm``'s set ``max_model_len``): the run's items are read (into a temporary run root: nothing is
    written beside the config) and its requests for that model expanded, their distinct prompts checked."""
    hooks = [(i, m, h) for i, m in enumerate(cfg.models)
             if (h := getattr(MODELS.get(m.kind), "prompt_problem", None)) is not None
             and m.params.get("max_model_len")]
    if not hooks:
        return []
    with tempfile.TemporaryDirectory(prefix="evalcore-validate-") as tmp:
        try:
            items = [it for d in cfg.datasets for it, _ in validated(d.name, DATASETS.build(d.kind, **d.params)
                     .items(DatasetContext(name=d.name, run_root=tmp, seed=cfg.seeds.derangement))) if it is not None]
        except Exception:  # noqa: BLE001 - a dataset that cannot be read is named by its own checks
            return []
        exp = expansion(cfg, items)
        out = []
        for i, m, hook in hooks:
            prompts = {r["prompt"] for r in iter_requests(cfg, items, exp, models={m.name}) if r.get("prompt")}
            if (found := hook(m.params, prompts)) is not None:
                out.append(f"models.{i}.{found[0]}: model {m.name!r}: {found[1]}")
        return out


def config_problems(cfg: RunConfig) -> list[str]:
    """The config's own mistakes that need the protocols or the registered datasets to see (the config model
    imports neither): vocabularies that cannot fit their tasks, unknown prompt template sets. Reads no file."""
    return vocabulary_problems(cfg) + template_problems(cfg)


def _vocabularies(proto: ProtocolConfig, i: int) -> Iterator[tuple[str, Any]]:
    """(field path, value) of every vocabulary the protocol configures that scores: the judge's, and the
    protocol's ``vocabulary`` for the ``{vocabulary}`` placeholder (not an ``agreement_judge``'s: it only measures
    agreement, e.g. of two vocabularies, and never scores)."""
    if proto.vocabulary is not None:
        yield f"protocols.{i}.vocabulary", proto.vocabulary
    if proto.judge is not None and proto.judge.params.get("vocabulary") is not None:
        yield f"protocols.{i}.judge.params.vocabulary", proto.judge.params["vocabulary"]


def vocabulary_problems(cfg: RunConfig) -> list[str]:
    """One line per configured vocabulary that cannot fit a factual task its protocol's datasets declare
    (:func:`evalcore.vocab.tasks.misfit`: instrument labels for a genre task, a list sharing no label with the
    task's vocabulary). Datasets that declare nothing (``items_file``) are not checked."""
    out = []
    for i, proto in enumerate(cfg.protocols):
        if not proto.kind_spec.vocabulary:
            continue
        tasks = list(declared(cfg, proto))
        for path, value in _vocabularies(proto, i):
            for dataset, task, lexicon, _ in tasks:
                why = misfit(value, task, lexicon)
                if why is not None:
                    out.append(f"{path}: cannot fit task {task!r} of dataset {dataset!r} ({why}; its labels are "
                               f"the {lexicon!r} vocabulary); name that vocabulary, or leave the judge out to get "
                               "the lexicon of each task")
                    break
    return out


def template_problems(cfg: RunConfig) -> list[str]:
    """One line per protocol whose ``templates`` name an unknown prompt template set
    (:mod:`evalcore.protocols.templates`)."""
    out = []
    for i, proto in enumerate(cfg.protocols):
        try:
            check_templates(proto.templates)
        except ValueError as e:
            out.append(f"protocols.{i}.templates: {e}")
    return out


def reproduction_problems(cfg: RunConfig) -> list[str]:
    """Each table ``reproduces`` names must be in the published-values file (which must read cleanly)."""
    if cfg.reproduces is None:
        return []
    try:
        cells = published.read(cfg.published_values or published.PUBLISHED_CSV)
    except (OSError, published.PublishedError) as e:
        return [f"published_values: {bounded(str(e), 300)}"]
    known = published.table_keys(cells)
    return [f"reproduces{'' if len(cfg.reproduces) == 1 else f'.{i}'}: no published cell of {key!r} (tables: "
            f"{', '.join(known[:12])} …)" for i, key in enumerate(cfg.reproduces) if key not in known]


def card_problems(cfg: RunConfig) -> list[str]:
    """``model_card.published`` must exist and read cleanly (:func:`evalcore.reports.model_card.read_published`)."""
    if cfg.model_card is None or cfg.model_card.published is None:
        return []
    try:
        model_card.read_published(storage.read_text(cfg.model_card.published))
    except (OSError, ValueError) as e:
        return [f"model_card.published: {bounded(str(e), 300)}"]
    return []


def _embedders(cfg: RunConfig) -> Iterator[tuple[str, EmbedderSpec]]:
    """(field path, spec) of every configured text embedder: a mir protocol's ``similarity``, a judge's."""
    for i, p in enumerate(cfg.protocols):
        if p.similarity is not None:
            yield f"protocols.{i}.similarity", p.similarity
        for field in ("judge", "agreement_judge"):
            j = getattr(p, field)
            if j is not None and isinstance(j.params.get("similarity"), dict):
                try:
                    yield f"protocols.{i}.{field}.params.similarity", EmbedderSpec.model_validate(j.params["similarity"])
                except ValueError:  # the params check names it
                    continue


def embedder_problems(cfg: RunConfig) -> list[str]:
    """One line per configured embedder whose folder is not a model of its kind on this machine
    (:func:`evalcore.core.embedders.path_problem`)."""
    return [f"{where}.path: {why}" for where, spec in _embedders(cfg) if (why := path_problem(spec)) is not None]


def package_problems(cfg: RunConfig) -> list[str]:
    """One line per configured model, judge or metric whose packages do not import where it will run, naming it
    and the install command (:mod:`evalcore.core.packages`): a judge's embedder (MMAU-Pro's NV-Embed-v2: torch), a mir
    protocol's similarity. A model with its own ``runtime_env`` brings its own packages."""
    out = []
    for i, p in enumerate(cfg.protocols):
        if p.kind_spec.released_rules and (gone := missing(MIR_REQUIRES)):
            out.append(f"protocols.{i}.kind: the released rules of protocol {p.name!r} need {', '.join(gone)}, which "
                       f"do not import here; install: {CORE}")
        if p.similarity is not None and (gone := missing(requires(p.similarity))):
            out.append(f"protocols.{i}.similarity.kind: the {p.similarity.kind} embedder of protocol {p.name!r} "
                       f"needs {', '.join(gone)}, which do not import here; install: {METRICS_EXTRA}")
    for where, package, kind, params in _components(cfg):
        if package == "datasets":
            continue
        at = where.split(".")
        if package == "models" and cfg.models[int(at[1])].runtime_env is not None:
            continue
        problem = component_problem(_REGISTRIES[package].get(kind), params)
        if problem is not None:
            who = (f"model {cfg.models[int(at[1])].name!r}" if package == "models"
                   else f"{at[2]} of protocol {cfg.protocols[int(at[1])].name!r}")
            out.append(f"{where.removesuffix('.params')}.kind: {who} ({kind}) {problem}")
    return out


#: ``evalcore validate`` names at most this many missing audio files per dataset, then stops reading its rows
AUDIO_MISSING_SHOWN = 5


@storage.scoped(lambda cfg, *_, **__: cfg.storage.settings())  # items files and audio reached as the run reaches them
def audio_problems(cfg: RunConfig, limit: int = AUDIO_MISSING_SHOWN) -> list[str]:
    """One line per dataset whose item rows name audio files that do not exist (datasets that list them from their
    params, nothing built: ``audio_uris(params)``, e.g. ``items_file``): the first ``limit`` missing with their rows, and how many rows were read
    (reading stops at the ``limit``-th missing file)."""
    out = []
    for i, d in enumerate(cfg.datasets):
        cls = DATASETS.get(d.kind)
        if not hasattr(cls, "audio_uris"):
            continue
        found, read, seen = [], 0, set()
        try:
            for read, (row, item_id, uri) in enumerate(cls.audio_uris(d.params), start=1):
                if uri not in seen and _absent(uri):
                    found.append(f"row {row} ({str(item_id)[:40]!r}): {uri}")
                    if len(found) == limit:
                        break
                seen.add(uri)
        except OSError as e:  # the items file itself: path_problems names it
            out.append(f"datasets.{i}.params: cannot read its items to check their audio: {bounded(str(e), 200)}")
            continue
        if found:
            stop = (f"stopped at the first {limit} missing, after {read} rows" if len(found) == limit
                    else f"{read} rows read")
            base = getattr(cls, "base_of", None)
            relative = (f"; a relative audio_uri is relative to {base(d.params['path'], d.params.get('audio_root'))}"
                        if callable(base) else "")
            out.append(f"datasets.{i}.params.path: {len(found)} audio file(s) named by its rows do not exist ({stop}"
                       f"{relative}): " + "; ".join(found))
    return out


def _absent(uri: str) -> bool:
    """``uri`` names no file (a URI that cannot be checked here, e.g. an unknown scheme, counts as present: reading
    it in the run makes that row's error)."""
    try:
        return not storage.exists(uri)
    except (OSError, ValueError):
        return False


def check(cfg: RunConfig, check_paths: bool = True, datasets: bool = True) -> None:
    """Raise :class:`ConfigError` listing every problem :func:`problems` finds."""
    found = problems(cfg, check_paths, datasets)
    if found:
        raise ConfigError("invalid run config:\n" + "\n".join(f"  {line}" for line in found))
