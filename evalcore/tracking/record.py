"""What a finished run offers a tracker, read from its files (never from the code that computed them).

A run root holds ``config.yaml``, ``run.json``, ``items/``, ``tables/summary.parquet``, ``tables/per_item.parquet``
and ``report.html`` (docs/outputs.md). :class:`FinishedRun` reads them once; each sink takes from it, per model:

* :func:`headline` — the summary's headline cells: every row of breakdown group ``all`` (values under each
  condition, ``paired_diff`` listening differences, counts of errored rows), keyed
  ``protocol/dataset/condition/metric`` (``protocol/dataset/<variant>/condition/metric`` for a prompt variant other
  than ``default``); a listening difference adds ``…_ci_low`` and ``…_ci_high``. Keys keep to the characters
  MLflow accepts (letters, digits, ``_ - . / : space``); anything else becomes ``_``.
* :meth:`FinishedRun.params` — evalcore's version, the config's hash, seeds, statistics, the model's kind, its
  checkpoint identity (URI, content hash, revision as the run recorded them), judges and prompts per protocol, the
  metric definitions and a fingerprint per dataset.
* :meth:`FinishedRun.tags` — the suite fingerprint, the model, its checkpoint and its listening verdict.

A nightly checkpoint adds its :class:`Checkpoint` (series, training step, verdict, flagged comparisons).
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd
import yaml

from evalcore.core import storage
from evalcore.core.fingerprint import digest, suite_fingerprint
from evalcore.core.nightly_outcome import Verdict
from evalcore.reports.verdict import MIN_ITEMS, PRIMARY, verdicts

log = logging.getLogger("evalcore")
_UNSAFE = re.compile(r"[^\w.\- :/]")
#: the per-item columns that hold a request's score, and the metric each stands for
ITEM_SCORES = ("correct", "correct_strict", "answered", "precision", "recall", "f1", "bleu", "bleu4", "meteor", "rouge", "bertscore",
               "cider", "claptext")


def safe(part: object) -> str:
    """One part of a key, in the characters every tracker accepts."""
    return _UNSAFE.sub("_", str(part)).strip("/") or "_"


def cell_key(protocol: str, dataset: str, variant: str, condition: str, metric: str) -> str:
    """``protocol/dataset/condition/metric`` (a variant other than ``default`` after the dataset)."""
    parts = [protocol, dataset] + ([] if variant in (None, "", "default") else [variant]) + [condition, metric]
    return "/".join(safe(p).replace("/", "_") for p in parts)


@dataclass(frozen=True)
class Checkpoint:
    """A nightly checkpoint: its series, training step, tonight's verdict and its flagged comparisons (lines); the
    nightly's name (the trackers' default experiment: every checkpoint of a nightly in one)."""

    series: str
    name: str
    step: int
    verdict: Verdict | None = None
    flagged: list[str] = field(default_factory=list)
    suite_fingerprint: str | None = None
    nightly: str | None = None


def headline(summary: pd.DataFrame, model: str) -> pd.DataFrame:
    """The model's headline cells: ``key``, ``value`` and the summary's columns, one row per key (a listening
    difference followed by its CI bounds as keys of their own)."""
    rows = summary[(summary["model"] == model) & (summary["group"] == "all")]
    keys = [cell_key(r.protocol, r.dataset, r.variant, r.condition, r.metric) for r in rows.itertuples()]
    cells = rows.assign(key=keys)
    diffs = cells[cells["kind"] == "paired_diff"]
    bounds = [diffs.assign(key=diffs["key"] + f"_{b}", value=diffs[b]) for b in ("ci_low", "ci_high")]
    out = pd.concat([cells, *bounds], ignore_index=True)
    twice = out["key"].duplicated(keep="first")
    if twice.any():  # two cells whose keys only differ in characters a tracker refuses: the first is logged
        log.warning("WARNING: tracking: %s: %d cell(s) share a key with another once made safe (e.g. %s); the first "
                    "is logged, the summary keeps both", model, int(twice.sum()), out.loc[twice, "key"].iloc[0])
    return out[~twice].reset_index(drop=True)


def primary_metric(metrics: list[str]) -> str:
    """The headline metric of a protocol's cells: the first of :data:`PRIMARY` it has, else its first."""
    return next((m for m in PRIMARY if m in metrics), metrics[0])


class FinishedRun:
    """A finished run's files, read lazily and once."""

    def __init__(self, root: str) -> None:
        self.root = root

    def path(self, *parts: str) -> str:
        return storage.join(self.root, *parts)

    def copied(self, folder: str, files: tuple[tuple[str, ...], ...]) -> list[str]:
        """The run's ``files`` (path parts under its root) that exist, copied into the local ``folder`` (the root
        may be on S3, a tracker's client takes local files); their local paths."""
        out = []
        for parts in files:
            src = self.path(*parts)
            if storage.exists(src):
                out.append(os.path.join(folder, parts[-1]))
                with open(out[-1], "wb") as f:
                    f.write(storage.read_bytes(src))
        return out

    def items_file(self, folder: str, model: str) -> str:
        """``model``'s rows of per_item.parquet written to ``<folder>/per_item.parquet``; its path."""
        local = os.path.join(folder, "per_item.parquet")
        self.per_item[self.per_item["model"] == model].to_parquet(local, index=False)
        return local

    @cached_property
    def meta(self) -> dict[str, Any]:
        """run.json (raises FileNotFoundError for a root that holds no finished run)."""
        return json.loads(storage.read_text(self.path("run.json")))

    @cached_property
    def config(self) -> dict[str, Any]:
        return yaml.safe_load(storage.read_text(self.path("config.yaml"))) or {}

    @cached_property
    def summary(self) -> pd.DataFrame:
        return storage.read_parquet(self.path("tables", "summary.parquet")).to_pandas()

    @cached_property
    def per_item(self) -> pd.DataFrame:
        return storage.read_parquet(self.path("tables", "per_item.parquet")).to_pandas()

    @cached_property
    def items(self) -> pd.DataFrame:
        return storage.read_parquet(self.path("items")).to_pandas()

    @cached_property
    def fingerprint(self) -> str:
        return suite_fingerprint(self.root)

    @property
    def name(self) -> str:
        return str(self.meta.get("name") or self.config.get("name") or "run")

    @property
    def models(self) -> list[str]:
        """The run's models, in config order (those with no summary row too)."""
        named = [m["name"] for m in self.config.get("models") or []]
        return list(dict.fromkeys(named + sorted(set(self.summary["model"]))))

    def model_info(self, model: str) -> dict[str, Any]:
        info = (self.meta.get("models") or {}).get(model) or {}
        return json.loads(info) if isinstance(info, str) else dict(info)

    def checkpoint_identity(self, model: str) -> dict[str, Any]:
        """The checkpoint as the run recorded it: ``uri``, ``sha256``, ``revision`` when known, else its name."""
        ck = self.model_info(model).get("checkpoint")
        return ck if isinstance(ck, dict) else ({"checkpoint": ck} if ck else {})

    def listens(self, model: str) -> str:
        found = verdicts(self.summary, int(self.meta.get("min_items") or MIN_ITEMS), models=[model])
        return next((v.listens for v in found if v.model == model), "unclear")

    def config_hash(self) -> str:
        """The hash of the run's config minus its storage root and trackers (the same settings, the same hash)."""
        cfg = {k: v for k, v in self.config.items() if k != "tracking"}
        cfg["storage"] = {k: v for k, v in (cfg.get("storage") or {}).items() if k != "root"}
        return digest(cfg)

    def dataset_fingerprints(self) -> dict[str, str]:
        """dataset → hash of its items (ids, questions, labels, options; audio locations left out)."""
        items = self.items.drop(columns=[c for c in ("audio_uri", "metadata") if c in self.items.columns])
        return {str(d): digest(g.sort_values("item_id").astype(str).to_dict("records"))
                for d, g in items.groupby("dataset", sort=True)}

    def params(self, model: str) -> dict[str, str]:
        """The MLflow params / W&B config of ``model``'s run: strings, none holding a secret."""
        cfg, out = self.config, {}
        out["evalcore.version"] = str(self.meta.get("version"))
        out["config.hash"] = self.config_hash()
        for k, v in (cfg.get("seeds") or {}).items():
            out[f"seeds.{k}"] = str(v)
        for k, v in (cfg.get("stats") or {}).items():
            out[f"stats.{k}"] = str(v)
        spec = next((m for m in cfg.get("models") or [] if m.get("name") == model), {})
        out["model.name"], out["model.kind"] = model, str(spec.get("kind"))
        for k, v in self.checkpoint_identity(model).items():
            out[f"checkpoint.{k}"] = str(v)
        judged = self.per_item[self.per_item["model"] == model] if "judge" in self.per_item.columns else None
        for p in cfg.get("protocols") or []:
            name = p["name"]
            seen = sorted(set(judged.loc[judged["protocol"] == name, "judge"].dropna())) if judged is not None else []
            out[f"judge.{name}"] = ", ".join(seen) or (json.dumps(p.get("judge"), sort_keys=True) if p.get("judge")
                                                       else "none")
            prompts = p.get("templates") or (digest(p["variants"]) if p.get("variants") else "default")
            out[f"prompt.{name}"] = prompts if isinstance(prompts, str) else json.dumps(prompts, sort_keys=True)
        for metric, definition in sorted(set(zip(self.summary["metric"], self.summary["definition"].astype(str)))):
            out[f"definition.{safe(metric)}"] = definition
        for d, fp in self.dataset_fingerprints().items():
            out[f"dataset.{safe(d)}"] = fp
        return out

    def tags(self, model: str, checkpoint: Checkpoint | None = None) -> dict[str, str]:
        """Tags of ``model``'s run: what a tracker's search filters on, and the key that keeps a replay from
        logging a run twice (:meth:`key`)."""
        ck = self.checkpoint_identity(model)
        out = {"evalcore.suite_fingerprint": (checkpoint and checkpoint.suite_fingerprint) or self.fingerprint,
               "evalcore.model": model, "evalcore.run": self.name, "evalcore.run_root": self.root,
               "evalcore.checkpoint": checkpoint.name if checkpoint else str(ck.get("uri") or ck.get("checkpoint")
                                                                             or ""),
               "evalcore.listens": self.listens(model), "evalcore.key": self.key(model, checkpoint)}
        if checkpoint is not None:
            out.update({"evalcore.series": checkpoint.series, "evalcore.step": str(checkpoint.step),
                        "evalcore.verdict": str(checkpoint.verdict or ""),
                        "evalcore.flagged": str(len(checkpoint.flagged))})
        return out

    def key(self, model: str, checkpoint: Checkpoint | None = None) -> str:
        """What makes a logged run the same run: a nightly checkpoint's suite, series and name; else the run's
        root, its finish time and the model (a run written again into the same root is a new run)."""
        if checkpoint is not None:
            return digest(["nightly", checkpoint.suite_fingerprint or self.fingerprint, checkpoint.series,
                           checkpoint.name])
        return digest(["run", self.root, self.meta.get("created"), model])

    def note(self, model: str, checkpoint: Checkpoint | None = None) -> str:
        """A few lines for people: the listening verdict, and a checkpoint's verdict with its flagged rows."""
        lines = [f"{model}: listens {self.listens(model)} (evalcore run {self.name}, {self.root})"]
        if checkpoint is not None:
            lines.append(f"{checkpoint.series}/{checkpoint.name} at step {checkpoint.step}: {checkpoint.verdict}"
                         + (f", {len(checkpoint.flagged)} flagged" if checkpoint.flagged else ""))
            lines += [f"- {line}" for line in checkpoint.flagged[:50]]
        return "\n".join(lines)

