"""Ray job entrypoint of the nightly benchmark (the RayCronJob's):
``ray job submit --working-dir . -- python jobs/nightly.py CONFIG [--out URI]``.

The same code path as ``evalcore nightly``: it connects to the cluster named by $RAY_ADDRESS (set by
``ray job submit``), evaluates the new checkpoints of every series and writes the ledger, comparisons and
dashboard under the config's storage root or --out. Exit codes as ``evalcore nightly`` (0, 1, 2, 3).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the working dir

from evalcore.cli import app  # noqa: E402

if __name__ == "__main__":
    app(args=["nightly", *sys.argv[1:]])
