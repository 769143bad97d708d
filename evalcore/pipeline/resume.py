"""Starting or resuming a run at its root: which config applies and what an earlier attempt left.

* A fresh run refuses a root holding an *unfinished* run (committed shards, no ``run.json``): that
  work would be lost silently. A *finished* run at the root is replaced (its outputs are removed).
* ``evalcore run --resume RUN_URI`` takes the run's own ``config.yaml``; a config given as well
  must agree with it (only ``storage.root`` and the ``ray`` section may differ), else it refuses
  naming the differing fields. Uncommitted files of the killed attempt are deleted.
* A resumed run runs again the committed requests with an error row of a retried class
  (:func:`retried_requests`; ``transient`` by default); those that failed only in their judge are
  judged again on their committed answer (:func:`rejudged_rows`), without calling their model.
"""

from __future__ import annotations

import logging
from typing import Any

import yaml

from evalcore.core import storage
from evalcore.runconfig.config import ConfigError, RunConfig, parse_config
from evalcore.core.errors import class_of
from evalcore.pipeline import attempts
from evalcore.pipeline.commit import COMMITS, RunStateError, clean_uncommitted, shard_markers

log = logging.getLogger("evalcore")

#: config fields that may differ between the attempts of one run (where it runs, not what it computes)
_MAY_DIFFER = (("storage", "root"), ("ray",), ("tracking",))
_OUTPUTS = (COMMITS, attempts.ATTEMPTS, "responses", "judgments", "items", "item_errors", "tables")  # markers first


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Dotted paths at which two config dumps differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            out += differences(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}.{i}")]
    return [] if a == b else [path or "(top level)"]


def _comparable(cfg: RunConfig) -> dict:
    data = cfg.model_dump(mode="json")
    for keys in _MAY_DIFFER:
        d = data
        for k in keys[:-1]:
            d = d[k]
        d.pop(keys[-1], None)
    return data


def resume_config(run_uri: str, given: RunConfig | None = None) -> RunConfig:
    """The config of the run at ``run_uri`` (its ``config.yaml``), rooted there.

    ``given`` (a config passed on the command line too) must agree with it except for ``storage.root``
    and ``ray``; its ``ray`` section then applies. Raises :class:`RunStateError` otherwise."""
    path = storage.join(run_uri, "config.yaml")
    try:
        text = storage.read_text(path)
    except FileNotFoundError:
        raise RunStateError(f"cannot resume {run_uri}: it holds no run ({path} not found)") from None
    except OSError as e:  # e.g. no endpoint known yet for an S3-compatible store: the config is on it
        hint = ("; for an S3-compatible store give the run's CONFIG too (its storage.s3 names the endpoint) "
                "or set AWS_ENDPOINT_URL_S3" if storage.is_s3(run_uri) else "")
        raise RunStateError(f"cannot resume {run_uri}: cannot read {path} ({e}){hint}") from None
    try:
        saved = parse_config(yaml.safe_load(text))
    except (ConfigError, yaml.YAMLError) as e:
        raise RunStateError(f"cannot resume {run_uri}: its config.yaml is not valid: {e}") from None
    if given is not None:
        diff = differences(_comparable(saved), _comparable(given))
        if diff:
            raise RunStateError(f"cannot resume {run_uri}: the given config differs from the run's own config.yaml "
                                f"at {', '.join(diff)}; resume without a config to use the run's own, or start a "
                                "new run with --out")
        saved = saved.model_copy(update={"ray": given.ray})
    return saved.model_copy(update={"storage": saved.storage.model_copy(update={"root": run_uri})})


def open_run(cfg: RunConfig, resume: bool) -> storage.RunStorage:
    """Prepare the run root: on resume claim the next attempt (:mod:`evalcore.pipeline.attempts`: an earlier attempt
    still running commits nothing more), then drop uncommitted files; fresh, refuse an unfinished run and replace a
    finished one, then write ``config.yaml``. Returns the run's confined storage."""
    root = cfg.root
    out = storage.RunStorage(root)
    if resume:
        n = attempts.claim_next(out, (int(m.get("attempt", 0)) for m in shard_markers(root, index=False)))
        log.info("resume: attempt %d of %s", n, root)
        clean_uncommitted(out)
        return out
    if not storage.exists(storage.join(root, "run.json")):
        n = len(shard_markers(root))
        if n:
            raise RunStateError(f"{root} holds an unfinished run ({n} shard(s) committed): resume it with "
                                f"`evalcore run --resume {root}`, or remove it or choose another --out")
    removed = 0
    for d in _OUTPUTS:  # markers first: if this is interrupted, what remains is uncommitted
        for uri in storage.list_files(storage.join(root, d)):
            out.delete(uri)
            removed += 1
    for name in ("run.json", "report.md"):
        removed += out.delete(storage.join(root, name))
    if removed:
        log.info("run root %s: replaced the outputs of an earlier run (%d files)", root, removed)
    out.makedirs(root)
    out.write_text(storage.join(root, "config.yaml"), yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    return out


# ----------------------------------------------------------------------------- committed errors run again


def retried_requests(rows: list[dict], classes: set[str]) -> dict[str, list[dict]]:
    """request_id → its committed rows, for every request with an error row of a class in ``classes``."""
    if not classes:
        return {}
    ids = {r["request_id"] for r in rows
           if r.get("error") is not None and class_of(r.get("error_stage"), r.get("error_class")) in classes}
    out: dict[str, list[dict]] = {}
    for r in rows:
        if r["request_id"] in ids:
            out.setdefault(r["request_id"], []).append(r)
    return out


_JUDGED = ("judge", "extracted", "dropped", "parsed_index", "credited", "embedding_key", "scores", "error",
           "error_stage", "error_class")


def rejudged_rows(retried: dict[str, list[dict]]) -> list[dict]:
    """The committed rows (every chunk) of the retried requests that failed only in their judge, with an
    answer for every chunk: they go to the judge again, with their errors and judgments cleared."""
    out = []
    for rows in retried.values():
        if all(r.get("text") is not None and r.get("error_stage") in (None, "judge") for r in rows):
            out += [{**r, **{k: None for k in _JUDGED}} for r in rows]
    return out
