"""Helpers of the tracking tests: a fresh MLflow sqlite store (a blank one made once per session and copied: MLflow's
migrations take seconds), the headline cells a summary says a tracker must hold, and MLflow read back with its own
client."""

from __future__ import annotations

import functools
import math
import shutil
import tempfile
from pathlib import Path

import pandas as pd


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
