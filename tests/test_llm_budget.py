"""The shared rate budget: unit behaviour on a fake clock, then threads and Ray actors vs a rate-limited server."""

from __future__ import annotations

import bisect
import threading
import uuid

import pytest

from evalcore.llm.actors import LLMWorker, complete_many
from evalcore.llm.budget import Lease, RayBudget, TokenBucketBudget, estimate_tokens
from evalcore.llm.client import EndpointConfig, LLMClient
from llm_server import TEST_API_KEY_ENV, LLMServer, default_answer, install_test_key

KEY = install_test_key()  # before any Ray start, so workers inherit it

WINDOW_S = 3.0
LIMIT = 30  # requests per WINDOW_S at the server and in the budget
BUDGET = dict(rpm=LIMIT, tpm=1_000_000, period_s=WINDOW_S, burst_s=0.25, margin_s=0.5)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def max_in_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max((bisect.bisect_left(times, t + window) - i for i, t in enumerate(times)), default=0)


def test_bucket_never_exceeds_limit_in_any_window_and_stays_efficient():
    clock = FakeClock()
    b = TokenBucketBudget(rpm=60, tpm=10**9, period_s=60, clock=clock)
    grants = []
    while clock.t < 600:  # greedy caller for 10 simulated minutes, 10 ms steps
        got = b.acquire(10)
        if isinstance(got, Lease):
            grants.append(clock.t)
            b.settle(got, 10)
        else:
            clock.t += 0.01
    assert max_in_window(grants, 60.0) <= 60
    assert len(grants) / 600 * 60 >= 0.95 * 60  # ≥ 95 % of the limit over time


def test_tokens_reserved_then_corrected():
    clock = FakeClock()
    b = TokenBucketBudget(rpm=10**6, tpm=620, period_s=60, burst_s=60, margin_s=2, clock=clock)
    first = b.acquire(600)
    assert isinstance(first, Lease)
    assert isinstance(b.acquire(100), float)  # reservation blocks a second large request
    b.settle(first, 50)  # actual usage refunds 550 tokens
    assert isinstance(b.acquire(100), Lease)


def test_penalize_pauses_everyone_and_halves_concurrency():
    clock = FakeClock()
    b = TokenBucketBudget(rpm=10**6, tpm=10**9, max_concurrency=8, clock=clock)
    b.penalize(2.0)
    b.penalize(2.0)  # a second 429 during the same pause does not halve again
    assert b.stats()["concurrency"] == 4
    wait = b.acquire(1)
    assert isinstance(wait, float) and wait == pytest.approx(2.0)
    clock.t = 2.01
    leases = [b.acquire(1) for _ in range(5)]
    assert [isinstance(x, Lease) for x in leases] == [True] * 4 + [False]  # concurrency cap 4
    for lease in leases[:4]:
        b.settle(lease, 1)
    assert b.stats()["concurrency"] > 4  # additive increase on success


def test_expired_leases_free_their_slot():
    clock = FakeClock()
    b = TokenBucketBudget(rpm=10**6, tpm=10**9, max_concurrency=1, lease_ttl_s=5, clock=clock)
    assert isinstance(b.acquire(1), Lease) and not isinstance(b.acquire(1), Lease)
    clock.t = 6
    assert isinstance(b.acquire(1), Lease) and b.stats()["expired"] == 1


def test_estimate_is_conservative():
    m = [{"role": "user", "content": "x" * 400}]
    assert estimate_tokens(m, 50) >= 100 + 50


def config(srv: LLMServer) -> EndpointConfig:
    return EndpointConfig(base_url=srv.base_url, model="test-model", api_key_env=TEST_API_KEY_ENV,
                          rpm=LIMIT, tpm=1_000_000, timeout_s=5, max_retries=3, max_tokens=16,
                          backoff_base_s=0.05, backoff_max_s=0.5, max_budget_wait_s=60)


def check_server(srv: LLMServer, n_expected: int) -> None:
    """Every request reached the server and none was over its limit (throughput: benchmarks/judge_throughput.py)."""
    assert len(srv.requests) == n_expected
    assert srv.rate_limited() == 0
    assert srv.max_in_window(WINDOW_S) <= LIMIT
    assert srv.max_in_window(1.0) <= LIMIT
    assert max(srv.per_second().values()) <= LIMIT


def test_threads_share_one_budget_under_the_server_limit():
    n = 60
    with LLMServer(rpm=LIMIT, window_s=WINDOW_S) as srv:
        budget = TokenBucketBudget(**BUDGET)
        client = LLMClient(config(srv), budget)
        out = complete_many(client, [[{"role": "user", "content": f"q{i}"}] for i in range(n)], threads=12)
        check_server(srv, n)
    assert [c.text for c in out] == [default_answer([{"role": "user", "content": f"q{i}"}]) for i in range(n)]


@pytest.mark.ray
def test_ray_actors_and_threads_share_one_budget(local_ray):
    ray = local_ray
    n_actors, per_actor, driver_items = 3, 20, 15
    with LLMServer(rpm=LIMIT, window_s=WINDOW_S) as srv:
        budget = RayBudget(f"budget-{uuid.uuid4().hex[:8]}", **BUDGET)
        client = LLMClient(config(srv), budget)
        worker_cls = ray.remote(num_cpus=0)(LLMWorker)
        workers = [worker_cls.remote(client, 4) for _ in range(n_actors)]
        ray.get([w.run.remote([]) for w in workers])  # actors up before the first request
        refs = [w.run.remote([[{"role": "user", "content": f"a{a}-{i}"}] for i in range(per_actor)])
                for a, w in enumerate(workers)]
        local: list = []
        th = threading.Thread(target=lambda: local.extend(
            complete_many(client, [[{"role": "user", "content": f"d{i}"}] for i in range(driver_items)], 3)))
        th.start()
        remote = ray.get(refs, timeout=120)
        th.join(timeout=120)
        check_server(srv, n_actors * per_actor + driver_items)
        stats = budget.stats()
        budget.kill()
    assert all(r["text"] and r["error"] is None for rows in remote for r in rows)
    assert len(local) == driver_items and all(c.text for c in local)
    assert stats["granted"] == n_actors * per_actor + driver_items and stats["in_flight"] == 0
