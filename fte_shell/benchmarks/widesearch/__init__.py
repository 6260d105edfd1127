"""WideSearch (Wong et al., 2025; ``widesearch:DIR``, or a directory holding ``widesearch.jsonl``): broad
table-filling tasks, their table answers and the benchmark's two-step scoring (alignment with a judge
model, then row/item precision, recall, F1 and success).

- :mod:`.spec`: the published data layout (``widesearch.jsonl`` + ``widesearch_gold/<id>.csv``) and the
  table-answer instructions the agent gets;
- :mod:`.table`: reading the agent's Markdown table and the gold CSV as the public scorer does;
- :mod:`.cells`: preprocessors and cell metrics;
- :mod:`.align`: the judge model (column names, key vocabulary, ``llm_judge`` columns);
- :mod:`.score`: one answer's score; :mod:`.runs`: scoring a sweep's runs; :mod:`.report`: the report
  section (Success, Row-F1, Item-F1; ``avg_n``/``max_n``/``min_n`` over repetitions).

docs/bench.md describes the format, the scoring and where it differs from the public scorer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...config import BenchmarkOptions
from ..base import Log, Question, QuestionAnswer, ScriptedTask
from ..grading import JudgeRequest, JudgeSummary
from ..presets import Preset
from ..sections import Placed
from .align import ModelTableJudge
from .report import widesearch_report_section
from .runs import judge_widesearch
from .spec import TASKS_FILE, load_widesearch, split_task_prompt, table_answer


class WideSearch(QuestionAnswer):
    kind = "widesearch"
    judge_preset = "widesearch"
    presets = (Preset("widesearch", "WideSearch's own two-step table scoring (a grading model aligns, when given)"),)
    summary = "widesearch:DIR — WideSearch's widesearch.jsonl + widesearch_gold/<id>.csv (table answers)"

    def claims(self, path: Path) -> bool:
        return path.is_dir() and (path / TASKS_FILE).exists()

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        return load_widesearch(source)

    def scripted_task(self, text: str) -> ScriptedTask | None:
        query, columns = split_task_prompt(text)
        if not columns:
            return None
        return ScriptedTask(query=query, finish=lambda turn: table_answer(turn, columns))

    def judge(self, req: JudgeRequest, summary: JudgeSummary) -> None:
        """The WideSearch scorer (with either method); the judge model, when given, aligns and grades."""
        if req.sweep is None:  # a run directory outside its sweep: no evaluation spec to score against
            summary.skipped += 1
            return
        judge_widesearch(req.root, req.sweep, summary, judge=ModelTableJudge(req.llm.cfg) if req.llm else None,
                         force=req.force, concurrency=req.concurrency, on_done=req.on_done)

    def report_sections(self) -> Sequence[Placed]:
        return (Placed(widesearch_report_section, "results"),)


BENCHMARK = WideSearch()

__all__ = ["BENCHMARK", "WideSearch"]
