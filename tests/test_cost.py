"""Cost: the price a run uses (``[model.price]`` over the built-in table), the cost of one call's usage in
every shape servers report it, cost per call and per run through the real client and a loopback server,
``agent.max_total_tokens`` (stop ``token_budget``, a result), the live log's running totals, and the
report's cost per profile and per correct answer on hand-made runs. Every expected number is computed by
hand in the comments."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import drive, trajectory
from rich.console import Console
from test_agent import NotesProfile, call

from fte_shell.cli.run import EventPrinter
from fte_shell.config import ModelConfig, ModelPrice, RunConfig
from fte_shell.metrics import summarize_profile
from fte_shell.metrics.runs import run_metrics
from fte_shell.model.prices import PRICES, billed_tokens, price_for, usage_cost
from fte_shell.record.rundir import RunWriter
from fte_shell.report.build import write_report
from fte_shell.standins.server import ScriptedServer, ScriptTurn
from fte_shell.stops import is_infra_failure

PRICE = ModelPrice(input=2.0, cached_input=0.5, output=8.0)
USAGE = {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200,
         "prompt_tokens_details": {"cached_tokens": 400}, "completion_tokens_details": {"reasoning_tokens": 150}}
# (1000 - 400) × 2.0 + 400 × 0.5 + 200 × 8.0 = 1200 + 200 + 1600 = 3000 USD per 10⁶ → 0.003
USAGE_COST = 0.003


def test_price_from_config_beats_the_table_and_router_prefixes_find_the_entry() -> None:
    assert price_for(ModelConfig(model="gpt-4o")) == PRICES["gpt-4o"]
    assert price_for(ModelConfig(model="openai/gpt-4o")) == PRICES["gpt-4o"]
    assert price_for(ModelConfig(model="gpt-4o", price=PRICE)) == PRICE
    assert price_for(ModelConfig(model="Qwen/Qwen3-8B")) is None


def test_usage_cost_in_each_servers_shape() -> None:
    assert billed_tokens(USAGE) == (600, 400, 200)  # reasoning is inside completion_tokens (OpenAI)
    assert usage_cost(USAGE, PRICE) == pytest.approx(USAGE_COST)
    # DeepSeek: prompt_cache_hit_tokens; 300 hit of 1000, 100 out at 0.56 / 0.07 / 1.68:
    # 700 × 0.56 + 300 × 0.07 + 100 × 1.68 = 392 + 21 + 168 = 581 → 0.000581
    ds = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100, "prompt_cache_hit_tokens": 300,
          "prompt_cache_miss_tokens": 700}
    assert usage_cost(ds, PRICES["deepseek-chat"]) == pytest.approx(0.000581)
    # Responses API names: 500 in (100 cached), 50 out at PRICE: 400 × 2 + 100 × 0.5 + 50 × 8 = 1250 → 0.00125
    resp = {"input_tokens": 500, "output_tokens": 50, "total_tokens": 550, "input_tokens_details": {"cached_tokens": 100}}
    assert usage_cost(resp, PRICE) == pytest.approx(0.00125)
    # reasoning reported OUTSIDE completion_tokens (total = 100 + 10 + 40): output 50 → 100 × 2 + 50 × 8 = 600
    apart = {"prompt_tokens": 100, "completion_tokens": 10, "reasoning_tokens": 40, "total_tokens": 150}
    assert billed_tokens(apart) == (100, 0, 50) and usage_cost(apart, PRICE) == pytest.approx(0.0006)
    # ... and inside them (total = 100 + 10): not added
    inside = {"prompt_tokens": 100, "completion_tokens": 10, "reasoning_tokens": 4, "total_tokens": 110}
    assert billed_tokens(inside) == (100, 0, 10)
    # no cached_input price: cached tokens at the input price: 1000 × 2 + 200 × 8 = 3600 → 0.0036
    assert usage_cost(USAGE, ModelPrice(input=2.0, output=8.0)) == pytest.approx(0.0036)


class FixedUsage(ScriptedServer):
    """The scripted server, answering every request with the same usage object (cached and reasoning
    tokens included, as OpenAI reports them)."""

    def _response(self, n: int, body: dict[str, Any], turn: ScriptTurn) -> dict[str, Any]:
        out = super()._response(n, body, turn)
        out["usage"] = dict(USAGE)
        return out


def run_notes(tmp_path: Path, script: list[Any], price: ModelPrice | None, **agent: Any) -> tuple[Any, list[dict]]:
    with FixedUsage(script) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", price=price))
        for k, v in agent.items():
            setattr(cfg.agent, k, v)
        with RunWriter(tmp_path / "run") as rec:
            result = drive(cfg, NotesProfile(), rec, "q", run_id="r1")
    return result, trajectory(tmp_path / "run")


def test_cost_per_call_and_per_run(tmp_path: Path) -> None:
    script = [ScriptTurn(tool_calls=[call("note", {"text": "a"})]), "<answer>a</answer>"]
    result, events = run_notes(tmp_path, script, PRICE)
    calls = [e for e in events if e["type"] == "model_call"]
    assert [c["cost_usd"] for c in calls] == pytest.approx([USAGE_COST, USAGE_COST])
    assert result.cost_usd == pytest.approx(2 * USAGE_COST)  # 0.006
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    assert saved["cost_usd"] == pytest.approx(0.006) and events[-1]["cost_usd"] == pytest.approx(0.006)


def test_unknown_price_records_tokens_only(tmp_path: Path) -> None:
    result, events = run_notes(tmp_path, ["<answer>a</answer>"], None)
    assert result.cost_usd is None and result.usage["total_tokens"] == 1200
    assert "cost_usd" not in next(e for e in events if e["type"] == "model_call")
    assert json.loads((tmp_path / "run" / "result.json").read_text())["cost_usd"] is None


def test_token_budget_stops_the_run_as_a_result(tmp_path: Path) -> None:
    # 1200 tokens a call: after call 1, 1200 < 2000 → call 2; after it 2400 >= 2000 → no call 3
    script = [ScriptTurn(tool_calls=[call("note", {"text": str(i)})]) for i in range(5)]
    result, events = run_notes(tmp_path, script, PRICE, max_total_tokens=2000)
    assert (result.stop_reason, result.turns, result.usage["total_tokens"]) == ("token_budget", 2, 2400)
    assert not is_infra_failure("token_budget")
    assert any(e["type"] == "error" and "2,400 tokens spent" in e["message"] for e in events)


def test_live_log_shows_running_tokens_and_cost_and_says_unknown_price_once() -> None:
    buf = io.StringIO()
    printer = EventPrinter(Console(file=buf, width=200, highlight=False))
    printer({"type": "start", "question": "q", "profile": "fte", "model": "m", "tools": []})
    for _ in range(2):
        printer({"type": "model_call", "turn": 1, "latency_s": 0.1, "usage": USAGE, "cost_usd": USAGE_COST,
                 "message": {}})
    text = buf.getvalue()
    assert "$0.0030 · so far 1,200 tokens, $0.0030" in text and "so far 2,400 tokens, $0.0060" in text
    assert "no price known" not in text
    printer({"type": "start", "question": "q", "profile": "fte", "model": "m2", "tools": []})
    for _ in range(2):
        printer({"type": "model_call", "turn": 1, "latency_s": 0.1, "usage": USAGE, "message": {}})
    later = buf.getvalue()[len(text):]
    assert later.count("no price known for model m2: tokens only") == 1 and "$" not in later
    assert "so far 2,400 tokens" in later


def hand_run(root: Path, profile: str, qid: str, cost: float | None, correct: bool | None,
             stop: str = "answer") -> Path:
    d = root / "runs" / profile / qid / "r0"
    d.mkdir(parents=True)
    (d / "trajectory.jsonl").write_text(json.dumps({"type": "start", "t": 0, "question": "q", "profile": profile,
                                                    "model": "m"}) + "\n")
    (d / "result.json").write_text(json.dumps({
        "question": "q", "answer": "x", "profile": profile, "model": "m", "turns": 1, "stop_reason": stop,
        "tool_calls": {}, "usage": {"prompt_tokens": 90, "completion_tokens": 10, "total_tokens": 100},
        "cost_usd": cost, "wall_s": 1.0, "run_id": qid, "meta": {}}))
    if correct is not None:
        (d / "judgement.json").write_text(json.dumps({"match": {"correct": correct, "f1": 1.0 if correct else 0.0}}))
    return d


def test_cost_per_profile_and_per_correct_answer(tmp_path: Path) -> None:
    # fte: 0.10 (correct) + 0.30 (wrong) + 0.20 (correct) + an infra failure that cost 5.00 (not a result)
    #   cost 0.60, per run 0.60 / 3 = 0.20, per correct 0.60 / 2 = 0.30
    # shell: 0.40 (wrong), 0.50 (not judged): cost 0.90, per run 0.45, per correct: none correct → None
    # old: one run without a cost → no cost at all (not a partial sum)
    runs = [hand_run(tmp_path, "fte", "q1", 0.10, True), hand_run(tmp_path, "fte", "q2", 0.30, False),
            hand_run(tmp_path, "fte", "q3", 0.20, True),
            hand_run(tmp_path, "fte", "q4", 5.00, None, stop="endpoint_unavailable")]
    fte = summarize_profile("fte", [run_metrics(d) for d in runs])
    assert (fte.cost_usd, fte.cost_per_run, fte.cost_per_correct) == pytest.approx((0.60, 0.20, 0.30))
    shell = summarize_profile("shell", [run_metrics(hand_run(tmp_path, "shell", "q1", 0.40, False)),
                                        run_metrics(hand_run(tmp_path, "shell", "q2", 0.50, None))])
    assert (shell.cost_usd, shell.cost_per_run, shell.cost_per_correct) == (pytest.approx(0.90), pytest.approx(0.45), None)
    old = summarize_profile("old", [run_metrics(hand_run(tmp_path, "old", "q1", None, True)),
                                    run_metrics(hand_run(tmp_path, "old", "q2", 0.5, True))])
    assert (old.cost_usd, old.cost_per_run, old.cost_per_correct) == (None, None, None)
    r = write_report([tmp_path], tmp_path / "rep")
    md = Path(r.markdown).read_text()
    head = next(line for line in md.splitlines() if line.startswith("| Profile"))
    assert "| Cost | Cost/run | Cost/correct |" in head
    fte_row = next(line for line in md.splitlines() if line.startswith("| fte "))
    assert "| $0.60 | $0.20 | $0.30 |" in fte_row


def test_price_limits_and_budget_stay_out_of_the_config_digest() -> None:
    from fte_shell.config import BudgetConfig
    from fte_shell.digest import canonical_config, config_digest

    base = RunConfig(model=ModelConfig(model="m"))
    priced = RunConfig(model=ModelConfig(model="m", price=PRICE, rpm=10, tpm=1000),
                       budget=BudgetConfig(max_cost=5.0, max_tokens_total=10))
    assert config_digest(base) == config_digest(priced)  # a higher budget or a fixed price resumes
    canon = canonical_config(base)
    assert "budget" not in canon and "max_total_tokens" not in canon["agent"]  # older runs' digests hold
    capped = RunConfig(model=ModelConfig(model="m"))
    capped.agent.max_total_tokens = 5000
    assert config_digest(capped) != config_digest(base)  # a per-run budget changes what a run does


def test_max_cost_without_a_price_is_refused_before_any_run(tmp_path: Path) -> None:
    from fte_shell.config import BudgetConfig
    from fte_shell.errors import ConfigError
    from fte_shell.sweep import BenchConfig, run_sweep

    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps({"id": "q1", "question": "q?", "answer": "a"}) + "\n")
    cfg = RunConfig(model=ModelConfig(base_url="http://127.0.0.1:9/v1", model="unpriced", api_key="x"),
                    budget=BudgetConfig(max_cost=1.0))
    with pytest.raises(ConfigError, match="--max-cost needs a price: no price known for model 'unpriced'"):
        run_sweep(BenchConfig(dataset=f"jsonl:{data}", profiles=["snippet-only"], out=tmp_path / "sw"), cfg)
    assert not (tmp_path / "sw" / "runs").exists()


class ReaderProfile(NotesProfile):
    """``note`` as a tool that calls a reader model of its own, spending 500 + 100 tokens (reported in
    its result's ``meta.summary_usage``, as visit-summary's ``visit`` does)."""

    def execute(self, name: str, args: dict[str, Any]) -> Any:
        res = super().execute(name, args)
        res.meta["summary_usage"] = {"prompt_tokens": 500, "completion_tokens": 100, "total_tokens": 600}
        return res


def run_reader(tmp_path: Path, script: list[Any], reader: ModelConfig | None, **agent: Any) -> Any:
    with FixedUsage(script) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", price=PRICE))
        cfg.agent.summary_model = reader
        for k, v in agent.items():
            setattr(cfg.agent, k, v)
        with RunWriter(tmp_path / "run") as rec:
            return drive(cfg, ReaderProfile(), rec, "q")


def test_a_reader_models_tokens_are_in_the_cost_and_the_token_budget(tmp_path: Path) -> None:
    script = [ScriptTurn(tool_calls=[call("note", {"text": "a"})]), "<answer>a</answer>"]
    # the agent's price for the reader: 2 × 0.003 + (500 × 2 + 100 × 8) / 10⁶ = 0.006 + 0.0018 = 0.0078
    assert run_reader(tmp_path / "a", script, None).cost_usd == pytest.approx(0.0078)
    # a reader with its own price (1 and 1): 0.006 + 600 / 10⁶ = 0.0066
    own = ModelConfig(model="small", price=ModelPrice(input=1.0, output=1.0))
    assert run_reader(tmp_path / "b", script, own).cost_usd == pytest.approx(0.0066)
    # a reader whose price is unknown: the agent's calls only, 0.006
    assert run_reader(tmp_path / "c", script, ModelConfig(model="small")).cost_usd == pytest.approx(0.006)
    # token budget 1500: after turn 1, 1200 (agent) + 600 (reader) = 1800 >= 1500 → no turn 2
    long = [ScriptTurn(tool_calls=[call("note", {"text": str(i)})]) for i in range(3)]
    r = run_reader(tmp_path / "d", long, None, max_total_tokens=1500)
    assert (r.stop_reason, r.turns, r.usage["total_tokens"], r.summary_usage["total_tokens"]) == ("token_budget", 1, 1200, 600)
