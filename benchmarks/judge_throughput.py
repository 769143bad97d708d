"""Judge throughput: several Ray actors share one RayBudget against a local rate-limited server.

The server (tests/llm_server.py, 127.0.0.1) enforces ``--rpm`` over a sliding 60 s window and
answers 429 above it. Prints achieved rate ÷ limit (goal ≥ 0.9, never > 1.0), the most
requests seen in any 60 s window and any 1 s window, and the 429 count.

    .venv/bin/python benchmarks/judge_throughput.py [--rpm 600] [--seconds 75] [--actors 4] [--threads 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key  # noqa: E402

from evalcore.llm.actors import LLMWorker  # noqa: E402
from evalcore.llm.budget import RayBudget  # noqa: E402
from evalcore.llm.client import EndpointConfig, LLMClient  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rpm", type=int, default=600)
    ap.add_argument("--seconds", type=float, default=75.0)
    ap.add_argument("--actors", type=int, default=4)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--window", type=float, default=60.0, help="server window and budget period (s)")
    args = ap.parse_args()

    install_test_key()  # before ray.init so the workers inherit it
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             _node_ip_address="127.0.0.1")
    # enough items that the actors never run dry during the run; the rest are cancelled
    per_actor = int(args.rpm * args.seconds / 60 / args.actors * 1.5) + 10
    batch = 20
    with LLMServer(rpm=args.rpm, tpm=10**9, window_s=args.window) as srv:
        budget = RayBudget(f"bench-{uuid.uuid4().hex[:8]}", rpm=args.rpm, tpm=10**9, period_s=args.window)
        config = EndpointConfig(base_url=srv.base_url, model="bench-model", api_key_env=TEST_API_KEY_ENV,
                                rpm=args.rpm, tpm=10**9, timeout_s=10, max_retries=5, max_tokens=32)
        client = LLMClient(config, budget)
        workers = [ray.remote(num_cpus=0)(LLMWorker).remote(client, args.threads) for _ in range(args.actors)]
        ray.get([w.run.remote([]) for w in workers])
        t0 = time.monotonic()
        pending = []
        queues = {i: iter(range(0, per_actor, batch)) for i in range(args.actors)}
        for i, w in enumerate(workers):  # two batches in flight per actor
            for _ in range(2):
                start = next(queues[i])
                pending.append((i, w.run.remote([[{"role": "user", "content": f"a{i} item {j}"}]
                                                 for j in range(start, start + batch)])))
        done_items, errors = 0, 0
        while pending and time.monotonic() - t0 < args.seconds:
            ready, _ = ray.wait([r for _, r in pending], num_returns=1, timeout=1.0)
            for ref in ready:
                i = next(k for k, r in pending if r == ref)
                pending = [(k, r) for k, r in pending if r != ref]
                rows = ray.get(ref)
                done_items += len(rows)
                errors += sum(r["error"] is not None for r in rows)
                start = next(queues[i], None)
                if start is not None:
                    pending.append((i, workers[i].run.remote([[{"role": "user", "content": f"a{i} item {j}"}]
                                                             for j in range(start, start + batch)])))
        elapsed = time.monotonic() - t0
        statuses = srv.statuses()
        # count only requests that arrived inside the measured interval
        t_start = min(r.t for r in srv.requests)
        in_run = [r for r in srv.requests if r.t <= t_start + elapsed]
        stats = budget.stats()
        for w in workers:
            ray.kill(w)
        budget.kill()
        max60, max1 = srv.max_in_window(args.window), srv.max_in_window(1.0)
    ray.shutdown()

    achieved_rpm = len(in_run) / elapsed * 60
    print(f"actors={args.actors} threads/actor={args.threads} limit={args.rpm} RPM window={args.window:g}s "
          f"duration={elapsed:.1f}s")
    print(f"server requests in run: {len(in_run)}  completed items (whole batches): {done_items}  error rows: {errors}")
    print(f"achieved rate: {achieved_rpm:.1f} RPM  ratio achieved/limit = {achieved_rpm / args.rpm:.3f}")
    print(f"max requests in any {args.window:g}s window: {max60} (limit {args.rpm});  in any 1s window: {max1}")
    print(f"HTTP statuses: {dict(statuses)}  429 count: {statuses.get(429, 0)} (limiter: {srv.rate_limited()})")
    print(f"budget: {stats}")


if __name__ == "__main__":
    main()
