"""Small real third-party plugins, one of each kind, loaded by ``module:attr`` as a package outside
fte-shell would be (``[sandbox] provider = "tests.thirdparty_plugins:PROVIDER"``, ``fte-shell export
tests.thirdparty_plugins:EXPORTER …``): nothing in fte-shell names them (tests/test_plugins.py,
tests/test_export_cli.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fte_shell.agent.context import KeepRecent
from fte_shell.benchmarks.base import Log, Question, QuestionAnswer, question_id
from fte_shell.config import BenchmarkOptions, ContextConfig, ModelConfig
from fte_shell.config.base import StrictModel
from fte_shell.config.standard import StandardOptions
from fte_shell.export.base import Exported
from fte_shell.export.common import read_runs
from fte_shell.profiles.answer_format import FinalAnswer
from fte_shell.profiles.base import Tool
from fte_shell.profiles.fte import FteProfile
from fte_shell.profiles.shell import ShellProfile
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


class PlainShell(ShellProfile):
    """A profile that runs a box: the shell profile under another name (``uses_box`` comes with it)."""

    name = "plain-shell"


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


# --- an exporter: docs/export.md "Adding an exporter" shows this text (tests/test_export_cli.py checks) ---
class AnswersOptions(StrictModel):
    """The options of the ``answers-table`` exporter (one ``--flag`` each)."""

    gold: bool = False
    """Add the gold answer (the sweep's questions.jsonl) as a last column."""
    file_name: str = "answers.tsv"
    """The table's file name in --out."""


class AnswersTable:
    """An exporter: one tab-separated line per run (arm, question id, repetition, stop reason, answer)."""

    name = "answers-table"
    summary = "One tab-separated line per run: arm, question id, repetition, stop reason, answer."
    reads = "runs"
    writes = "Directory for the table (answers.tsv unless --file-name)."
    options_model = AnswersOptions

    def require(self) -> None:
        pass  # no library to install

    def export(self, paths: Sequence[Path], out: Path, options: AnswersOptions,
               on_run: Callable[[Any], None]) -> Exported:
        lines = []
        for run in read_runs(paths):
            answer = str((run.result or {}).get("answer") or "")
            cells = [run.arm, run.qid, str(run.rep), run.stop_reason or "", answer]
            cells += [run.target] if options.gold else []
            lines.append("\t".join(" ".join(c.split()) for c in cells))
            on_run(run)
        out.mkdir(parents=True, exist_ok=True)
        table = out / options.file_name
        table.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return Exported("table", [table])


EXPORTER = AnswersTable()
