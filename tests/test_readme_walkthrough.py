"""The README's "Your own data in 10 minutes" commands, run as written (the fenced block after
``<!-- walkthrough -->``) in an empty directory with this interpreter's ``bin/`` first on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from readme import readme_block

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("RAY_ADDRESS", None)  # the run starts its own local cluster, as on a fresh machine
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", readme_block("walkthrough")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.startswith("ok: mine ")  # validate, then the report's first lines (run is --quiet)
    for name in ("report.md", "run.json", "tables/per_item.parquet", "tables/summary.parquet"):
        assert (tmp_path / "runs" / "mine" / name).is_file(), name
    head = "\n".join((tmp_path / "runs" / "mine" / "report.md").read_text().splitlines()[:30])
    assert head in proc.stdout
    # two items per protocol: the report opens with the verdict, which no CI from 2 items can decide
    report = (tmp_path / "runs" / "mine" / "report.md").read_text()
    assert head.split("\n## ")[1].startswith("Does it listen?")
    assert "* **listener** — listens: **unclear**" in head and "too few items (n=2 < 20)" in head
    assert "CI > 0" not in report and "listens: **yes**" not in report
    assert "listener: listens unclear — " in proc.stdout and (tmp_path / "runs" / "mine" / "report.html").is_file()
    root = (tmp_path / "runs" / "mine").resolve()
    assert f"report: {root}/report.md\nreport: {root}/report.html\n" in proc.stdout  # both pages' paths
    # run --quiet: a healthy run says nothing on stderr of its progress, and no library warning gets through
    chatter = [ln for ln in proc.stderr.splitlines()
               if ln.startswith(("stage ", "items:", "requests:", "evalcore: run", "progress:")) or "Warning" in ln]
    assert chatter == [], chatter
