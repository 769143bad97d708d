"""Helpers of the tracking tests: a fresh MLflow sqlite store (a blank one made once per session and copied: MLflow's
migrations take seconds), the headline cells a summary says a tracker must hold, and MLflow read back with its own
client; a finished run's files written by hand."""

from __future__ import annotations

import functools
import json
import math
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml


@functools.lru_cache(maxsize=1)
def _blank_store() -> Path:
    """An MLflow sqlite store with its tables made and nothing in it (once per session)."""
    from mlflow import MlflowClient

    path = Path(tempfile.mkdtemp(prefix="evalcore-mlflow-blank-")) / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


def fresh_mlflow_uri(folder: Path) -> str:
    """``sqlite:///<folder>/mlflow.db``, a new empty store."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(_blank_store(), folder / "mlflow.db")
    return f"sqlite:///{folder / 'mlflow.db'}"


def expected_cells(summary: pd.DataFrame, model: str) -> dict[str, float]:
    """What the issue asks a tracker to hold, restated from the summary itself: every row of group ``all`` as
    ``protocol/dataset/condition/metric`` (a non-default variant after the dataset), and each listening difference's
    CI bounds as ``…_ci_low`` / ``…_ci_high``."""
    out: dict[str, float] = {}
    for r in summary[(summary["model"] == model) & (summary["group"] == "all")].itertuples():
        key = "/".join([r.protocol, r.dataset] + ([] if r.variant == "default" else [r.variant])
                       + [r.condition, r.metric])
        out[key] = r.value
        if r.kind == "paired_diff":
            out[key + "_ci_low"], out[key + "_ci_high"] = r.ci_low, r.ci_high
    return out


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def mlflow_runs(uri: str, experiment: str) -> list:
    """Every active run of ``experiment`` at ``uri`` (MLflow's own client)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=1000)


def handmade_run(root: Path, n_cells: int) -> None:
    """A finished run's files written by hand: ``n_cells`` headline cells of one model (a third of them listening
    differences), its per-item rows, items, run.json and config.yaml."""
    rows = []
    for i in range(n_cells):
        diff = i % 3 == 2
        rows.append({"protocol": "mcq", "protocol_kind": "mcq", "dataset": f"d{i // 30}", "model": "m",
                     "condition": "correct-random" if diff else ("correct", "random")[i % 3],
                     "variant": "default", "group": "all", "kind": "paired_diff" if diff else "value",
                     "metric": f"metric{i % 30 // 3}", "value": i / n_cells, "ci_low": i / n_cells - 0.01,
                     "ci_high": i / n_cells + 0.01, "n": 10, "definition": "a test metric", "ci_unit": "item",
                     "clusters": 10, "test": None, "p_value": None, "p_adjusted": None, "correction": None})
    (root / "tables").mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(root / "tables" / "summary.parquet", index=False)
    pd.DataFrame([{"request_id": "r1", "dataset": "d0", "item_id": "i1", "protocol": "mcq", "model": "m",
                   "condition": "correct", "variant": "default", "text": "(A)", "correct": 1.0}]).to_parquet(
        root / "tables" / "per_item.parquet", index=False)
    (root / "items").mkdir()
    pq.write_table(pa.table({"dataset": ["d0"], "item_id": ["i1"], "question": ["q?"], "audio_uri": ["/a.wav"]}),
                   root / "items" / "part-0.parquet")
    (root / "run.json").write_text(json.dumps({"name": "handmade", "version": "0.1.0", "created": "now",
                                               "models": {"m": {"checkpoint": {"uri": "s3://b/ck", "sha256": "ab"}}}}))
    (root / "config.yaml").write_text(yaml.safe_dump({"name": "handmade", "models": [{"name": "m", "kind": "x"}],
                                                      "seeds": {"bootstrap": 3}, "protocols": [{"name": "mcq"}]}))
