"""Small real third-party plugins, one of each kind, loaded by ``module:attr`` as a package outside
fte-shell would be (``[sandbox] provider = "tests.thirdparty_plugins:PROVIDER"``): nothing in fte-shell
names them (tests/test_plugins.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fte_shell.agent.context import KeepRecent
from fte_shell.benchmarks.base import Log, Question, QuestionAnswer, question_id
from fte_shell.config import BenchmarkOptions, ContextConfig, ModelConfig
from fte_shell.config.standard import StandardOptions
from fte_shell.profiles.answer_format import FinalAnswer
from fte_shell.profiles.base import Tool
from fte_shell.profiles.fte import FteProfile
from fte_shell.sandbox import get_provider


class RenamedBwrap:
    """A sandbox provider: bwrap's boxes under another name (every call goes to the built-in provider)."""

    name = "renamed-bwrap"

    def __getattr__(self, attr: str) -> Any:
        return getattr(get_provider("bwrap"), attr)


PROVIDER = RenamedBwrap()


class ReadOnlyFte(FteProfile):
    """A profile: FtE's tools that only read what is already fetched (``read``, ``grep``, ``list_fetched``)."""

    name = "read-only-fte"

    def _make_tools(self) -> list[Tool]:
        return [t for t in super()._make_tools() if t.name in ("read", "grep", "list_fetched")]


class KeepLastOne(KeepRecent):
    """A context strategy: ``keep_recent`` that keeps only the last observation verbatim, whatever ``keep``."""

    def __init__(self, cfg: ContextConfig, model: ModelConfig):
        super().__init__(cfg.model_copy(update={"keep": 1}), model)


class TabSeparated(QuestionAnswer):
    """A benchmark: one ``question<TAB>answer`` a line, graded by exact match."""

    kind = "tab-separated"
    summary = "tab-separated — question<TAB>answer lines"
    judge_preset = "match"

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        rows = [line.split("\t") for line in source.read_text().splitlines() if line.strip()]
        return [Question(id=question_id(q), question=q, answer=a) for q, a in rows]


BENCHMARK = TabSeparated()


class FinalLine:
    """An answer format: the answer is the reply's line starting ``FINAL:``."""

    system_prompt = "Answer with one line: FINAL: <answer>."
    nudge = "Reply with a tool call or a line FINAL: <answer>."
    final_request = "Give your answer now, as FINAL: <answer>."

    def pose(self, question: str) -> str:
        return question

    def parse(self, text: str) -> FinalAnswer | None:
        line = next((ln for ln in text.splitlines() if ln.startswith("FINAL:")), None)
        return None if line is None else FinalAnswer(line.removeprefix("FINAL:").strip())

    def record(self) -> dict[str, Any]:
        return {"name": "final-line"}


def final_line(options: StandardOptions) -> FinalLine:
    """The factory ``agent.standard.answer_format = "tests.thirdparty_plugins:final_line"`` names."""
    return FinalLine()
