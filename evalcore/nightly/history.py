"""Across nights: each finished checkpoint against the previous finished one and the pinned baseline
(``regressions``), and every finished checkpoint's summary rows in order (``history``).

A comparison is computed once and kept under ``<root>/compare/<series>/`` (keyed by both runs' suite
fingerprints, identities and the bootstrap settings), so a night with no new checkpoint reads no per-item
table again.
"""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa

from evalcore.core import storage
from evalcore.nightly import compare
from evalcore.nightly.compare import REGRESSION_COLUMNS
from evalcore.nightly.config import NightlyConfig
from evalcore.nightly.series import natural_key
from evalcore.core.nightly_outcome import LedgerRecord, Status


def finished(records: list[LedgerRecord], series: str) -> list[LedgerRecord]:
    """The series' finished records, oldest first (natural order of checkpoint names)."""
    return sorted((r for r in records if r.series == series and r.status is Status.FINISHED),
                  key=lambda r: natural_key(r.checkpoint))


def references(cfg: NightlyConfig, series: str, done: list[LedgerRecord],
               i: int) -> tuple[list[tuple[LedgerRecord, str]], list[str]]:
    """(reference record, role) pairs of ``done[i]`` and notes about references left out."""
    cur = done[i]
    refs: dict[str, tuple[LedgerRecord, list[str]]] = {}
    notes = []
    if i > 0:
        prev = done[i - 1]
        if prev.suite_fingerprint == cur.suite_fingerprint:
            refs[prev.checkpoint] = (prev, ["previous"])
        else:
            notes.append(f"series {series}: the suite changed between {prev.checkpoint} and {cur.checkpoint} "
                         f"(fingerprint {prev.suite_fingerprint} → {cur.suite_fingerprint}): "
                         f"{cur.checkpoint} starts a new baseline, not compared with {prev.checkpoint}")
    base = next((s.baseline for s in cfg.series if s.name == series), None)
    if base and base != cur.checkpoint:
        rec = next((r for r in done if r.checkpoint == base), None)
        if rec is None:
            notes.append(f"series {series}: baseline {base} has no finished evaluation yet")
        elif rec.suite_fingerprint != cur.suite_fingerprint:
            notes.append(f"series {series}: baseline {base} was evaluated with another suite; "
                         f"{cur.checkpoint} is not compared with it")
        else:
            refs.setdefault(base, (rec, []))[1].append("baseline")
    return [(r, "+".join(roles)) for r, roles in refs.values()], notes


def cached_comparison(cfg: NightlyConfig, folder: str, cur: LedgerRecord, ref: LedgerRecord,
                      label: str | None = None) -> pd.DataFrame:
    """Raw comparison rows of ``cur`` vs ``ref`` (no correction yet), from the cache under
    ``<root>/compare/<folder>/`` (file ``<label>--<key>.parquet``; label default ``<cur>--<ref>`` checkpoint
    names) or computed and cached there."""
    st = cfg.stats
    key = compare.digest([compare.VERSION, cur.suite_fingerprint, cur.identity, cur.finished,
                           ref.identity, ref.finished, st.bootstrap_resamples, st.confidence,
                           cfg.seeds.bootstrap])
    label = label or f"{cur.checkpoint}--{ref.checkpoint}"
    uri = storage.join(cfg.root, "compare", folder, f"{label}--{key}.parquet")
    if storage.exists(uri):
        return storage.read_parquet(uri).to_pandas()
    rows = compare.compare_scores(compare.load_scores(cur.run_root), compare.load_scores(ref.run_root),
                                  st.bootstrap_resamples, st.confidence, cfg.seeds.bootstrap)
    storage.write_parquet(pa.Table.from_pandas(rows, preserve_index=False), uri)
    return rows


def regressions(cfg: NightlyConfig, records: list[LedgerRecord]) -> tuple[pd.DataFrame, list[str]]:
    """Every finished checkpoint's comparisons, Holm-corrected per checkpoint and flagged; plus notes."""
    frames, notes = [], []
    for s in cfg.series:
        done = finished(records, s.name)
        for i, cur in enumerate(done):
            refs, why = references(cfg, s.name, done, i)
            notes += why
            parts = [cached_comparison(cfg, s.name, cur, ref).assign(reference=ref.checkpoint, reference_role=role)
                     for ref, role in refs]
            if parts:
                rows = compare.decide(pd.concat(parts, ignore_index=True), cfg.min_effect.of, cfg.alpha)
                frames.append(rows.assign(series=s.name, checkpoint=cur.checkpoint))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=_dtype(c)) for c in REGRESSION_COLUMNS}), notes
    return pd.concat(frames, ignore_index=True)[REGRESSION_COLUMNS], notes


def _dtype(column: str) -> str:
    if column in ("flagged", "improved"):
        return "bool"
    if column in ("n", "clusters"):
        return "int64"
    return "float64" if column in ("reference_value", "value", "delta", "ci_low", "ci_high", "p_value",
                                   "p_adjusted", "min_effect") else "object"


def history(cfg: NightlyConfig, records: list[LedgerRecord]) -> pd.DataFrame:
    """One row per finished checkpoint × summary row (and × row of its ``audio_required`` table, the figures over
    the items that need the audio, where the run has one), with the checkpoint's position in its series."""
    frames = []
    for s in cfg.series:
        for i, rec in enumerate(finished(records, s.name)):
            summary = storage.read_parquet(storage.join(rec.run_root, "tables", "summary.parquet")).to_pandas()
            required = storage.join(rec.run_root, "tables", "audio_required.parquet")
            if storage.exists(required):
                summary = pd.concat([summary, storage.read_parquet(required).to_pandas()], ignore_index=True)
            frames.append(summary.assign(series=s.name, checkpoint=rec.checkpoint, position=i,
                                         finished=rec.finished, suite_fingerprint=rec.suite_fingerprint,
                                         identity=json.dumps(rec.identity, sort_keys=True)))
    if not frames:
        return pd.DataFrame(columns=["series", "checkpoint", "position", "finished", "suite_fingerprint", "identity"])
    return pd.concat(frames, ignore_index=True)
