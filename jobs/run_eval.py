"""Ray job entrypoint: ``ray job submit --working-dir . -- PYTHON jobs/run_eval.py CONFIG --out URI``.

The same code path as ``evalcore run``: it connects to the cluster named by $RAY_ADDRESS (set by
``ray job submit``) and writes the run under --out (or the config's storage root). With ``--working-dir`` the
job runs in Ray's temporary copy of that directory, so the run root must be absolute (a path on the head, where the
job's driver runs and commits, or ``s3://``): a relative one, or none, exits 2 naming ``--out``. On a cluster of
several nodes, what the workers read must be on ``s3://`` or a shared mount (docs/cluster.md, "Many nodes"). PYTHON is an interpreter that
has evalcore's dependencies: the project's venv on a local head (README "Submitting to a Ray cluster"), the
image's ``python`` on KubeRay (k8s/rayjob.yaml).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the working dir

from evalcore.cli import app  # noqa: E402

if __name__ == "__main__":
    app(args=["run", *sys.argv[1:]])
