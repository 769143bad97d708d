"""The offline nightly demo, measured: `evalcore nightly` with no config (three listener checkpoints), then the
same again (nothing to evaluate), then with a fourth checkpoint added (only it is evaluated).

    python benchmarks/nightly_demo.py [--root DIR]

Prints each night's wall time, what it evaluated and how many requests it sent to a model, the rerun's share of
the first night's wall time, and the flagged comparisons. Timing depends on the machine's load: the load
average is printed with each figure.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
LINE = re.compile(r"nightly: (\d+) checkpoint\(s\) evaluated \((\d+) requests\), (\d+) failed")


def night(root: Path) -> tuple[float, int, int, str]:
    """One `evalcore nightly --out root`: (wall s, checkpoints evaluated, requests sent, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "evalcore.cli", "nightly", "--out", str(root)], capture_output=True,
                       text=True, env=env, cwd=REPO)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"evalcore nightly exited {p.returncode}:\n{p.stderr[-3000:]}")
    m = LINE.search(p.stderr)
    assert m, p.stderr[-2000:]
    return wall, int(m.group(1)), int(m.group(2)), p.stderr


def load() -> str:
    return "load average %.1f" % os.getloadavg()[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=None)
    args = ap.parse_args()
    root = Path(args.root or tempfile.mkdtemp(prefix="nightly-demo-"))
    print(f"root: {root}; {os.cpu_count()} CPUs")

    w1, n1, r1, _ = night(root)
    print(f"first night:  {w1:7.1f} s wall, {n1} checkpoints evaluated, {r1} requests to the model ({load()})")
    w2, n2, r2, _ = night(root)
    print(f"second night: {w2:7.1f} s wall, {n2} checkpoints evaluated, {r2} requests to the model ({load()})")
    print(f"rerun / first = {w2 / w1:.1%}")
    import json

    for f in sorted((root / "ledger").rglob("*.json")):
        r = json.loads(f.read_text())
        print(f"ledger {r['checkpoint']}: {r['status']}, attempts {r['attempts']}"
              + (f", last failure: {r['last_failure'][:300]}" if r.get("last_failure") else ""))

    reg = pd.read_parquet(root / "regressions.parquet")
    flagged = reg[reg["flagged"]]
    print(f"comparisons: {len(reg)}, flagged: {len(flagged)}; flagged per checkpoint: "
          f"{flagged.groupby('checkpoint').size().to_dict()}; per (checkpoint, protocol, group): "
          f"{flagged.groupby(['checkpoint', 'protocol', 'group']).size().to_dict()}")
    print("identical copy step-2000: flagged", int(reg[reg["checkpoint"] == "step-2000"]["flagged"].sum()),
          "max |delta|", float(reg[reg["checkpoint"] == "step-2000"]["delta"].abs().max()))

    from evalcore.nightly.demo import write_checkpoint

    write_checkpoint(str(root / "checkpoints" / "listener"), "step-4000", [])
    w3, n3, r3, err = night(root)
    evaluated = re.findall(r"nightly: evaluate \S+/(step-\d+) →", err)
    print(f"fourth checkpoint added: {w3:7.1f} s wall, evaluated {evaluated} ({n3}), {r3} requests ({load()})")
    reg = pd.read_parquet(root / "regressions.parquet")
    f4 = reg[(reg["checkpoint"] == "step-4000") & reg["flagged"]]
    print(f"step-4000 flagged: {len(f4)} (it listens fully again: vs step-3000 it improves, vs the baseline equal)")


if __name__ == "__main__":
    main()
