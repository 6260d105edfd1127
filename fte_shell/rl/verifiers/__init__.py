"""A verifiers (v1) taskset over fte-shell's benchmarks: ``vf-eval fte-shell-rl`` (docs/rl.md).

Each task is one benchmark question (``--env.taskset.dataset``: ``hotpotqa``, ``jsonl:PATH``,
``browsecomp-plus``…, read by :func:`fte_shell.benchmarks.registry.load_dataset`) with its gold answer;
its tools are the fte-shell profile's, served over MCP by :mod:`.toolset` (one episode, one box per
rollout); its reward is the model's ``<answer>`` graded by the dataset's grading preset, as ``fte-shell
judge`` grades a run (:class:`fte_shell.rl.grading.Grader`). The default harness is
:class:`~.harness.HostChatHarness` (verifiers' chat loop on the host's Python); any harness that takes
MCP tools works (``--env.agent.harness.id null``, ``codex``…).
"""

from __future__ import annotations

import functools

import verifiers.v1 as vf

from ...agent.replies import extract_answer
from ...benchmarks.llmjudge import LLMJudge, judge_model_config
from ...benchmarks.registry import load_dataset
from ...errors import ConfigError
from ...prompts import profile_addendum, system_prompt
from ..grading import Grader
from .harness import HostChatHarness
from .toolset import FteShellToolsConfig, FteShellToolset, run_config


class FteShellTaskData(vf.TaskData):
    """One benchmark question."""

    question: str = ""
    """The question as the agent is asked it."""
    answer: str | None = None
    """The gold answer (None: no reward)."""
    dataset: str = ""
    """The benchmark kind whose grading preset gives the reward ("": a run outside any benchmark's)."""


class FteShellTaskConfig(vf.TaskConfig):
    """The tools' episode and the grading (``--env.taskset.task.*``)."""

    tools: FteShellToolsConfig = FteShellToolsConfig()
    """fte-shell's configuration for the rollout's episode (profile, sandbox, search…)."""
    judge_model: str | None = None
    """The grading model of a model preset (else the dataset's model preset gives way to ``match``)."""
    judge_base_url: str | None = None
    """Its endpoint (default ``OPENAI_BASE_URL``)."""


@functools.cache
def _grader(tools_json: str, dataset: str, judge_model: str | None, base_url: str | None) -> Grader:
    cfg = run_config(FteShellToolsConfig.model_validate_json(tools_json))
    judge = LLMJudge(judge_model_config(judge_model, base_url=base_url)) if judge_model else None
    return Grader(cfg, dataset or None, judge)


class FteShellTask(vf.Task[FteShellTaskData, vf.State, FteShellTaskConfig]):
    """A question, fte-shell's tools, the dataset's grading."""

    @classmethod
    def toolsets(cls, config: FteShellTaskConfig) -> list[vf.Toolset]:
        return [FteShellToolset(config.tools)]

    @property
    def key(self) -> str:
        return self.data.id or self.hash

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        """1.0 when the final reply's ``<answer>`` is right by the dataset's grading preset, else 0.0."""
        if self.data.answer is None:
            return 0.0
        grader = _grader(self.config.tools.model_dump_json(), self.data.dataset, self.config.judge_model,
                         self.config.judge_base_url)
        verdict = await grader.grade(self.data.question, extract_answer(trace.last_reply), self.data.answer)
        return 1.0 if verdict.correct else 0.0


class FteShellTasksetConfig(vf.TasksetConfig):
    """Which questions (``--env.taskset.*``)."""

    dataset: str = ""
    """A dataset spec of ``fte-shell bench`` (``hotpotqa``, ``jsonl:PATH``, ``browsecomp-plus``…); required."""
    split: str = "dev"
    """The split (HotpotQA)."""
    limit: int | None = None
    """The first N questions (after ``sample``)."""
    sample: int | None = None
    """N questions drawn at random with ``seed``."""
    seed: int = 0
    """The sample's seed."""
    task: FteShellTaskConfig = FteShellTaskConfig()


class FteShellTaskset(vf.Taskset[FteShellTask, FteShellTasksetConfig]):
    """fte-shell's benchmark questions as verifiers tasks."""

    def load(self) -> list[FteShellTask]:
        c = self.config
        if not c.dataset:
            raise ConfigError("name the questions: --env.taskset.dataset hotpotqa (any `fte-shell bench` dataset spec)")
        cfg = run_config(c.task.tools)
        ds = load_dataset(c.dataset, split=c.split, limit=c.limit, sample=c.sample, seed=c.seed, options=cfg.benchmark)
        system = system_prompt(profile_addendum(cfg.agent.profile), cfg.agent.current_date, cfg.agent.system_prompt_file)
        return [FteShellTask(FteShellTaskData(id=q.id, prompt=q.question, system_prompt=system, question=q.question,
                                              answer=q.answer, dataset=ds.kind), c.task) for q in ds.questions]


__all__ = ["FteShellTask", "FteShellTaskData", "FteShellTaskset", "FteShellTasksetConfig", "HostChatHarness"]
