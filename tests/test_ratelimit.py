"""The client-side rate limiter (``model.rpm``/``model.tpm``: a sliding minute, a shared Retry-After
cool-down) with a fake clock, its use by the real client against a loopback server answering 429 with
Retry-After, the per-slot share on a cluster, and the sweep's gates (:mod:`fte_shell.sweep.pace`):
the concurrency throttle on repeated 429s and the budget's admission rule, with hand-computed numbers."""

from __future__ import annotations

import threading
from typing import Any

from fte_shell.config import ModelConfig, ModelPrice
from fte_shell.model import ModelClient
from fte_shell.model.ratelimit import Pacer, pacer_for, share
from fte_shell.standins.server import ScriptedServer, ScriptTurn
from fte_shell.sweep.pace import Budget, Gates, Throttle, run_spend


class FakeClock:
    """A clock that moves only when someone sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def pacer(rpm: int | None = None, tpm: int | None = None) -> tuple[Pacer, FakeClock]:
    clock = FakeClock()
    return Pacer(rpm, tpm, clock=clock, sleep=clock.sleep), clock


def test_rpm_waits_for_the_oldest_request_to_leave_the_minute() -> None:
    p, clock = pacer(rpm=2)
    p.wait(10)
    clock.now += 5  # t = 1005
    p.wait(10)
    assert clock.slept == []
    p.wait(10)  # the third: the first (t = 1000) leaves the window at 1060 → 55 s of waiting
    assert sum(clock.slept) == 55.0 and clock.now == 1060.0 and p.waited_s == 55.0


def test_tpm_counts_the_estimate_then_the_reported_tokens() -> None:
    p, clock = pacer(tpm=1000)
    a = p.wait(600)
    p.settle(a, 300)  # the server said 300: 700 left in this minute
    p.wait(700)
    assert clock.slept == []
    clock.now += 10
    p.wait(1)  # 300 + 700 + 1 > 1000: wait until the first (t = 1000) leaves at 1060, i.e. 50 s from 1010
    assert sum(clock.slept) == 50.0


def test_a_request_larger_than_tpm_alone_still_goes() -> None:
    p, clock = pacer(tpm=100)
    p.wait(500)
    assert clock.slept == []


def test_retry_after_holds_every_caller_and_wins_over_the_limits() -> None:
    p, clock = pacer()  # no limits at all
    p.record(429, 7.0)
    p.wait(1)
    assert sum(clock.slept) == 7.0
    assert p.wait(1, until=clock.now) is not None  # cool-down over: no wait
    p.record(429, 30.0)
    assert p.wait(1, until=clock.now + 10) is None  # the wait would pass the deadline


def test_listeners_hear_every_status_and_a_broken_listener_is_harmless() -> None:
    p, _ = pacer()
    heard: list[int] = []
    stop = p.listen(heard.append)
    p.listen(lambda s: 1 / 0)
    p.record(429)
    p.record(200)
    stop()
    p.record(500)
    assert heard == [429, 200]


def test_share_per_slot() -> None:
    assert (share(600, 4), share(3, 8), share(None, 4), share(100, 0)) == (150, 1, None, 100)


def test_the_client_shares_one_pacer_per_endpoint_and_hears_429_with_retry_after() -> None:
    slept: list[float] = []
    script = [ScriptTurn(status=429, retry_after=2), ScriptTurn(status=429, retry_after=3), "<answer>ok</answer>"]
    with ScriptedServer(script) as srv:
        cfg = ModelConfig(base_url=srv.base_url, model="rl-test", api_key="x", rpm=50, backoff_s=0.01)
        a, b = ModelClient(cfg, sleep=slept.append), ModelClient(ModelConfig(base_url=srv.base_url, model="rl-test"))
        assert a.pacer is b.pacer and a.pacer.rpm == 50  # b gives no limit: the sweep's stays
        heard: list[int] = []
        a.pacer.listen(heard.append)
        c = a.complete([{"role": "user", "content": "hi"}])
        # the Retry-After values are the client's backoff, not its exponential delay
        assert c.text == "<answer>ok</answer>" and slept == [2.0, 3.0] and heard == [429, 429, 200]
        assert pacer_for(a.endpoint, "rl-test", None, None) is a.pacer
        a.close()
        b.close()


def test_throttle_halves_on_repeated_429s_and_climbs_back() -> None:
    logs: list[str] = []
    t = Throttle(4, log=logs.append, lower_after=3, raise_after=2)
    for _ in range(3):
        t.on_status(429)
    assert t.allowed == 2
    t.on_status(200)
    t.on_status(429)  # the run of successes starts again
    t.on_status(200)
    assert t.allowed == 2
    for _ in range(2):
        t.on_status(429)  # 3 since the last change (one before the success) → 1
    assert (t.allowed, t.lowest, t.lowered) == (1, 1, 2)
    for _ in range(6):
        t.on_status(200)  # +1 per 2 successes: 2, 3, 4
    assert t.allowed == 4
    t.on_status(200)
    t.on_status(200)
    assert t.allowed == 4  # never above the slots
    assert [m.split(":")[1].strip() for m in logs] == [
        "concurrency lowered to 2 of 4", "concurrency lowered to 1 of 4", "concurrency raised to 2 of 4",
        "concurrency raised to 3 of 4", "concurrency raised to 4 of 4"]


def test_throttle_blocks_starts_above_the_allowed_concurrency() -> None:
    t = Throttle(2, log=lambda m: None, lower_after=1)
    assert t.acquire() and t.acquire()
    t.on_status(429)  # allowed 1, two running
    got: list[bool] = []
    th = threading.Thread(target=lambda: got.append(t.acquire()))
    th.start()
    th.join(0.3)
    assert th.is_alive() and got == []  # waits while running (2) >= allowed (1)
    t.release()
    th.join(0.3)
    assert th.is_alive()  # running 1 >= allowed 1: still waits
    t.release()
    th.join(5)
    assert got == [True] and t.running == 1


def test_budget_admits_by_spent_plus_in_flight_at_the_mean() -> None:
    b = Budget(max_cost=1.0, max_tokens=None)
    b.add(100, 0.2)
    b.add(300, 0.2)  # on disk: 0.40 spent by 2 runs, mean 0.20
    # 0.40 + 1 × 0.20 = 0.60, + 2 = 0.80, + 3 = 1.00 (not past), + 4 = 1.20 (past)
    assert [b.admit() for _ in range(3)] == [True, True, True] and b.in_flight == 3
    got: list[bool] = []
    th = threading.Thread(target=lambda: got.append(b.admit()))
    th.start()
    th.join(0.3)
    assert th.is_alive()  # waits for the runs in flight to end
    b.settle(100, 0.05)  # cheaper than the mean: 0.45 by 3, mean 0.15; 0.45 + 3 × 0.15 = 0.90 → admitted
    th.join(5)
    assert got == [True] and b.in_flight == 3
    for _ in range(3):
        b.settle(100, 0.2)  # 1.05 spent by 6 runs: past the budget
    assert not b.admit() and b.reached == "max_cost"
    assert "$1.0500 of --max-cost $1.0000" in b.describe()


def test_budget_before_any_run_finished_is_one_at_a_time_and_tokens_count_too() -> None:
    b = Budget(max_cost=None, max_tokens=1000)
    assert b.admit()
    got: list[bool] = []
    th = threading.Thread(target=lambda: got.append(b.admit()))
    th.start()
    th.join(0.3)
    assert th.is_alive()  # no mean yet: a second run waits for the first
    b.settle(600, None)  # 600 spent; 600 + 600 > 1000 and nothing in flight: reached
    th.join(5)
    assert got == [False] and b.reached == "max_tokens_total"


def test_gates_release_the_throttle_when_the_budget_refuses() -> None:
    b = Budget(max_cost=None, max_tokens=10)
    b.add(20, None)  # already past
    t = Throttle(2, log=lambda m: None)
    g = Gates(lambda: True, t, b)
    assert not g.may_start() and t.running == 0
    free = Gates(lambda: True, Throttle(1, log=lambda m: None), Budget(None, None))
    assert free.may_start()
    free.ended((5, None))
    assert free.throttle.running == 0


def test_run_spend_from_result_json() -> None:
    price = ModelPrice(input=1.0, output=2.0)
    r: dict[str, Any] = {"usage": {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500},
                         "summary_usage": {"total_tokens": 100}, "cost_usd": 0.5}
    assert run_spend(r, price) == (1600, 0.5)
    r.pop("cost_usd")  # a run written before costs: its usage at the price, 1000 × 1 + 500 × 2 = 2000 → 0.002
    assert run_spend(r, price) == (1600, 0.002)
    assert run_spend(r, None) == (1600, None) and run_spend(None, price) == (0, None)


def test_the_thread_that_got_the_retry_after_is_not_held_twice() -> None:
    p, clock = pacer()
    cool = p.record(429, 7.0)
    assert cool == 1007.0
    p.wait(1, honoured=cool)  # it slept its own Retry-After (the client's backoff): no second wait
    assert clock.slept == []
    p.wait(1)  # another thread: held until 1007
    assert sum(clock.slept) == 7.0


def test_a_place_the_gate_gave_is_given_back_when_the_queue_closed_meanwhile(tmp_path: Any) -> None:
    from fte_shell.benchmarks.base import Question
    from fte_shell.sweep import Task
    from fte_shell.sweep.execute import WorkQueue

    t = Task(question=Question(id="q1", question="q?"), profile="fte", rep=0, run_dir=tmp_path / "r0")
    throttle = Throttle(1, log=lambda m: None)
    gates = Gates(lambda: True, throttle, Budget(None, None))

    def gate() -> bool:  # the sweep closes the queue (a full disk) while this worker passes the gate
        ok = gates.may_start()
        q.close()
        return ok

    q = WorkQueue([t], may_start=gate, not_started=lambda: gates.ended(None))
    assert q.get() is None and throttle.running == 0  # else the next start would wait forever
