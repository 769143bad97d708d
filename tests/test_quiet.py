"""``--quiet`` (:func:`evalcore.reports.console.setup` with ``quiet``): Python warnings (matplotlib's, transformers') and
evalcore's INFO lines stay off the console, evalcore's own warnings stay on it; without ``quiet`` both show. In a
process of its own, as a command runs (pytest records warnings itself, which would hide what the console does)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

SCRIPT = """
import logging, sys, warnings
from evalcore.reports import console
console.setup(quiet=sys.argv[1] == "quiet")
warnings.warn("a library's warning", UserWarning)
logging.getLogger("evalcore").info("stage decode: 4 requests")
logging.getLogger("evalcore").warning("a data warning of evalcore's own")
import os
print(os.environ.get("TQDM_DISABLE"), os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS"))
"""


def _run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_quiet_keeps_library_warnings_and_info_lines_off_the_console() -> None:
    quiet, loud = _run("quiet"), _run("loud")
    assert quiet.returncode == loud.returncode == 0, quiet.stderr + loud.stderr
    assert quiet.stderr == "a data warning of evalcore's own\n"
    assert quiet.stdout == "1 1\n"  # the libraries' progress bars off, for this process and its Ray workers
    assert "UserWarning: a library's warning" in loud.stderr and "stage decode: 4 requests" in loud.stderr
    assert loud.stdout == "None None\n"
