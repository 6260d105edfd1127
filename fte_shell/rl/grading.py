"""Rewards: an episode's answer graded the way ``fte-shell judge`` grades its run — the dataset's
grading preset (``[judge] preset`` or the benchmark's default; a model preset without a grading model
gives way to the model-free ``match``, as ``fte-shell judge`` does), through the very functions it uses:
:meth:`~fte_shell.benchmarks.presets.Preset.grade` for a rule or a prompt, the benchmark's own
:meth:`~fte_shell.benchmarks.base.Benchmark.judge` for a preset that is neither (WideSearch's tables)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ..benchmarks.answers import Verdict
from ..benchmarks.grading import JudgeRequest, JudgeSummary
from ..benchmarks.llmjudge import LLMJudge
from ..benchmarks.presets import Preset
from ..benchmarks.registry import FALLBACK, get, preset
from ..config import RunConfig
from ..errors import ConfigError, ModelError
from ..record.rundir import judge_key, primary_verdict, read_judgement, with_verdict, write_judgement
from ..sweep.judge import MODEL_FREE


class Grader:
    """One dataset's grading: ``await grader.reward(…)`` → 1.0 (correct) or 0.0, None without a gold answer."""

    def __init__(self, config: RunConfig, dataset: str | None = None, judge: LLMJudge | None = None,
                 concurrency: int = 8):
        self.benchmark = get(dataset) if dataset else FALLBACK
        chosen = preset(config.judge.preset or self.benchmark.judge_preset)
        if chosen.needs_model and judge is None:
            if config.judge.preset:  # named: as fte-shell judge, an error
                raise ConfigError(f"the {chosen.name} judge preset needs a grading model (judge=LLMJudge(…))")
            chosen = preset(MODEL_FREE)
        self.preset: Preset = chosen
        self.judge = judge
        self.key = judge_key(chosen.name, judge.model if chosen.needs_model and judge is not None else None)
        """The ``judgement.json`` key of its verdicts (``match``, ``llm-equivalence@MODEL``)."""
        self._calls = asyncio.Semaphore(concurrency)

    @property
    def own_rule(self) -> bool:
        """The benchmark grades its runs itself (the preset has neither a rule nor a prompt)."""
        return self.preset.rule is None and self.preset.prompt is None

    async def verdict(self, question: str, answer: str | None, gold: str, run_dir: Path, sweep: Path,
                      qid: str) -> Verdict | dict | None:
        """The verdict of one finished run (kept in its ``judgement.json``, as ``fte-shell judge`` would)."""
        if self.own_rule:
            req = JudgeRequest(root=run_dir, sweep=sweep, preset=self.preset, llm=self.judge, golds={qid: gold},
                               force=True, concurrency=1)
            summary = JudgeSummary()
            await asyncio.to_thread(self.benchmark.judge, req, summary)
            if summary.errors:
                raise ModelError(summary.errors[0])
            return primary_verdict(read_judgement(run_dir))
        v = await self.grade(question, answer, gold)
        await asyncio.to_thread(_keep, run_dir, self.key, v)
        return v

    async def grade(self, question: str, answer: str | None, gold: str) -> Verdict:
        """The preset's verdict of ``answer`` (a model preset: one call of the grading model, at most
        ``concurrency`` in flight); a benchmark's own grading needs a run: :meth:`verdict`."""
        if self.own_rule:
            raise ConfigError(f"the {self.preset.name} preset grades whole runs (its benchmark's own grading): "
                              "use an EpisodePool, which records them")
        async with self._calls:
            return await asyncio.to_thread(self.preset.grade, question, None, answer, gold, self.judge)


def _keep(run_dir: Path, key: str, v: Verdict) -> None:
    write_judgement(run_dir, with_verdict(read_judgement(run_dir), key, v.model_dump(mode="json")))


def reward_of(verdict: Verdict | dict | None) -> float | None:
    """1.0 for a correct verdict, 0.0 for a wrong one, None for none."""
    if verdict is None:
        return None
    correct = verdict.get("correct") if isinstance(verdict, dict) else verdict.correct
    return 1.0 if correct else 0.0
