"""WideSearch (Wong et al., 2025): broad table-filling tasks, their table answers and the benchmark's
two-step scoring (alignment with a judge model, then row/item precision, recall, F1 and success).

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

from .align import OpenAITableJudge, TableJudge
from .runs import is_widesearch_sweep, judge_widesearch
from .score import TableScore, score_table
from .spec import Evaluation, load_widesearch, required_columns

__all__ = [
    "Evaluation",
    "OpenAITableJudge",
    "TableJudge",
    "TableScore",
    "is_widesearch_sweep",
    "judge_widesearch",
    "load_widesearch",
    "required_columns",
    "score_table",
]
