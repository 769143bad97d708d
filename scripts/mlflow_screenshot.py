"""Regenerate docs/img/mlflow_nightly.png, docs/tracking.md's picture: MLflow's own UI showing the nightly demo's
metrics by training step, rendered by headless Chromium.

    .venv/bin/python scripts/mlflow_screenshot.py --ui-python /path/to/venv-with-mlflow/bin/python
    .venv/bin/python scripts/mlflow_screenshot.py --ui-python … --store /tmp/x/nightly.db   # an existing store

Without ``--store`` it runs the offline nightly demo (a few minutes on 2 cores) over five listener checkpoints —
step-1000, an identical step-2000, step-3000 deaf to timbre, step-6000 hearing again, step-7000 deaf again (the
series of tests/test_nightly_demo.py) — with the MLflow sink (``--track mlflow=sqlite:///…``). Then it starts
``mlflow server`` on 127.0.0.1 against that sqlite store with ``--ui-python`` (an interpreter with the full ``mlflow``
package at the ``tracking`` extra's version: ``scripts/build_mlflow_ui_venv.sh`` builds ``.venv-mlflow-ui``), opens MLflow's metric page of the
series' run (every checkpoint at its step), and saves Chromium's screenshot, MLflow's assistant panel cropped off.
Needs ``chromium`` on PATH. The server is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "img" / "mlflow_nightly.png"
METRICS = ("factual/synth/correct/f1_micro", "mcq/synth/correct-random/accuracy")
EXPERIMENT = "nightly-demo"
CHECKPOINTS = {"step-1000": [], "step-2000": [], "step-3000": ["timbre"], "step-6000": [], "step-7000": ["timbre"]}


def run_nightly(root: Path, store: Path) -> None:
    """The nightly demo's suite over CHECKPOINTS, logged to the MLflow store (this interpreter's evalcore)."""
    from evalcore.nightly.demo import write_checkpoint

    for name, deaf in CHECKPOINTS.items():
        write_checkpoint(str(root / "checkpoints" / "listener"), name, deaf)
    subprocess.run([sys.executable, "-m", "evalcore.cli", "nightly", "--out", str(root), "--track",
                    f"mlflow=sqlite:///{store}"], check=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, timeout_s: float = 180.0) -> None:
    t = time.monotonic()
    while time.monotonic() - t < timeout_s:
        if proc.poll() is not None:
            sys.exit(f"mlflow server exited ({proc.returncode})")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(1)
    sys.exit(f"mlflow server did not answer {url} within {timeout_s:.0f} s")


def page_url(base: str, store: Path) -> str:
    """MLflow's metric page ("metric view") of METRICS in the series' run (every checkpoint's cells at their steps),
    x axis the step. Its route
    reads JSON in the query: ``#/metric?runs=[…]&metric="…"&experiments=[…]&plot_metric_keys=[…]&…``."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    exp = client.get_experiment_by_name(EXPERIMENT)
    ids = [r.info.run_id for r in client.search_runs([exp.experiment_id],
                                                      filter_string="tags.`evalcore.series_run` = 'true'")]

    def j(x: object) -> str:
        return json.dumps(x, separators=(",", ":"))

    q = {"runs": j(ids), "metric": j(METRICS[0]), "experiments": j([exp.experiment_id]),
         "plot_metric_keys": j(list(METRICS)), "plot_layout": "{}", "x_axis": "step", "y_axis_scale": "linear",
         "line_smoothness": "1", "show_point": "true", "deselected_curves": "[]", "last_linear_y_axis_range": "[]"}
    return f"{base}/#/metric?{urllib.parse.urlencode(q, quote_via=urllib.parse.quote)}"


def screenshot(url: str, out: Path, width: int, height: int, crop_right: int) -> None:
    """``url`` in a ``width`` × ``height`` headless Chromium window, its right ``crop_right`` pixels cut off (MLflow's
    assistant panel, open on a fresh profile)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium is not installed (Debian: apt-get install chromium)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        raw = Path(profile) / "page.png"
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        f"--user-data-dir={profile}", "--hide-scrollbars", f"--window-size={width},{height}",
                        "--virtual-time-budget=90000", f"--screenshot={raw}", url], check=True, capture_output=True,
                       timeout=300)
        from PIL import Image  # matplotlib's dependency

        with Image.open(raw) as im:
            im.crop((0, 0, im.width - crop_right, im.height)).save(out, optimize=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ui-python", required=True, help="an interpreter with the full mlflow package (its UI)")
    ap.add_argument("--store", help="an existing sqlite store of a nightly (default: run the demo into a new one)")
    ap.add_argument("--out", default=str(OUT), help=f"where the PNG goes (default {OUT.relative_to(REPO)})")
    ap.add_argument("--size", default="2000x760", help="the window, WIDTHxHEIGHT")
    ap.add_argument("--crop-right", type=int, default=510, help="pixels cut off the right (the assistant panel)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(a.store) if a.store else Path(tmp) / "nightly.db"
        if not a.store:
            run_nightly(Path(tmp) / "nightly", store)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = subprocess.Popen([a.ui_python, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{store}",
                                   "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
        try:
            wait_up(f"{base}/health", server)
            url = page_url(base, store)
            width, height = (int(x) for x in a.size.split("x"))
            screenshot(url, Path(a.out), width, height, a.crop_right)
        finally:
            server.terminate()
            server.wait(timeout=60)
    print(f"wrote {a.out} ({url})")


if __name__ == "__main__":
    main()
