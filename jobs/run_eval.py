"""Ray job entrypoint: ``ray job submit --working-dir . -- python jobs/run_eval.py CONFIG [--out URI]``.

The same code path as ``evalcore run``: it connects to the cluster named by $RAY_ADDRESS
(set by ``ray job submit``) and writes the run under the config's storage root or --out.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the working dir

from evalcore.cli import app  # noqa: E402

if __name__ == "__main__":
    app(args=["run", *sys.argv[1:]])
