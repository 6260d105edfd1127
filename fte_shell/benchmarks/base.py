"""The benchmark seam: the :class:`Benchmark` protocol every dataset plugin implements, the question and
dataset models, and the helpers plugins share (stable ids, selection).

A benchmark is one module (or package) of :mod:`fte_shell.benchmarks` holding one object that satisfies
:class:`Benchmark`, listed once in :mod:`.registry`. Nothing outside this package branches on the dataset
kind: the sweep asks the plugin for its questions and its world, ``judge`` for its grading, ``report``
for its sections, the scripted policy for a task's answer shape. Plugins never import one another.

Every question gets a stable id: the dataset's own id when it has one, else the first 16 hex digits of
SHA-256 of the question text. Ids are made safe for use as a directory name.
"""

from __future__ import annotations

import csv
import hashlib
import io
import random
import re
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ..config import BenchmarkOptions, RunConfig
from ..errors import ConfigError
from .grading import JudgeRequest, JudgeSummary, judge_answers
from .presets import Preset
from .sections import Placed

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
Log = Callable[[str], None]


class Question(BaseModel):
    """One benchmark question."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    id: str
    """Stable, file-name-safe id (the dataset's id, or a hash of the question text)."""

    question: str
    """The question as given to the agent (with the benchmark's extra prompt text, if any)."""

    answer: str | None = None
    """The gold answer (None when the dataset has none)."""

    meta: dict[str, Any] = Field(default_factory=dict)
    """Extra fields of the dataset row (e.g. BrowseComp's ``problem_topic``, HotpotQA's ``type``)."""

    evaluation: dict[str, Any] | None = None
    """WideSearch: the task's evaluation spec (``required``, ``unique_columns``, ``eval_pipeline``); the
    gold table's CSV text is ``answer``. None for other datasets."""


class Dataset(BaseModel):
    """A loaded, selected list of questions and where it came from."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    kind: str
    """Which benchmark read it: :attr:`Benchmark.kind`, a key of :data:`.registry.BENCHMARKS`, or a third-party
    benchmark's ``module:attr`` reference (what finds it again)."""

    source: str
    """The file or directory it was read from."""

    split: str | None = None
    """The split (HotpotQA's ``dev``/``test``); None for benchmarks without splits."""

    questions: list[Question]
    """The questions after ``--limit`` / ``--sample``."""

    revisions: dict[str, Any] = Field(default_factory=dict)
    """Which data it is (:meth:`Benchmark.revisions`: ``{part: pin}``, e.g. BrowseComp-Plus's ``dataset`` and
    ``corpus``, each a Hugging Face revision or a content hash); empty when the benchmark pins nothing."""


@dataclass(frozen=True)
class WorldPlan:
    """What a benchmark needs of the world its runs search and fetch in (the sweep applies it to the run
    configuration; a benchmark that needs nothing returns the default: the configured search, open web)."""

    corpus: Path | None = None
    """A local corpus index (``fte_shell.search.corpus``) serving search and fetch by docid/url: the search
    backend becomes ``local`` over it."""

    closed: bool = False
    """A closed world: search results are cached in the sweep's own ``shared/search-cache`` whatever the
    configuration says (they must never mix with an open-web cache)."""

    prompts_file: Path | None = None
    """The benchmark's own prompt templates (BrowseComp-Plus's ``search_agent/prompts.py`` in a clone): the
    ``standard`` profile's ``agent.standard.prompts_file`` unless the configuration names one."""


@dataclass(frozen=True)
class ScriptedTask:
    """What the deterministic scripted policy needs to answer one of a benchmark's tasks: the part of the
    question to research, and how to shape its final answer turn."""

    query: str
    """The text to research (the question without the benchmark's answer-format instructions)."""

    finish: Callable[[Any], Any]
    """Turns the policy's final turn (a ``fte_shell.standins.server.ScriptTurn``) into one in the benchmark's
    answer format; other turns pass unchanged."""


class Benchmark(Protocol):
    """One dataset family: how to read it, the world its runs need, how to grade and report them."""

    kind: str
    """Spec prefix (``KIND:PATH``) and the ``dataset.kind`` of the sweeps it writes."""

    summary: str
    """One line: the spec and what it reads (shown in help and docs)."""

    has_splits: bool
    """Whether ``--split`` selects a part of the dataset (else the Dataset's split is None)."""

    judge_preset: str
    """The dataset's default grading preset (a judge prompt family with its parser, or a rule), used
    unless ``--judge-preset`` names another; the report says which graded each verdict."""

    presets: Sequence[Preset]
    """Grading presets of the benchmark's own (GAIA's rule), besides :data:`.presets.BUILTIN`; every
    benchmark's can grade any sweep (``--judge-preset``)."""

    def default_source(self) -> Path | None:
        """Where a bare ``KIND`` spec reads from (None: the spec needs a path)."""
        ...

    def claims(self, path: Path) -> bool:
        """Whether a bare path (no ``KIND:`` prefix) is this benchmark's; asked in registry order."""
        ...

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        """Every question of ``source`` as the agent is asked it (extra prompt text included, e.g.
        WideSearch's table-answer instructions); ConfigError naming file:line on a malformed one.
        ``options``: the ``[benchmark]`` table (each plugin reads its own options); ``log``: one-line notes
        for the user (e.g. how many tasks a filter dropped)."""
        ...

    def world(self, source: Path, corpus_dir: Path | None, log: Log | None, config: RunConfig) -> WorldPlan:
        """The world of the sweep's runs (a local corpus built once, a closed world). ``corpus_dir``: the
        user's ``--corpus-dir`` for an index the benchmark builds; ``config``: the sweep's run configuration
        (its ``benchmark`` options, its ``snapshot``)."""
        ...

    def revisions(self, source: Path) -> dict[str, Any]:
        """Which revision of its data ``source`` holds (``{part: pin}``, recorded in the sweep manifest's
        ``dataset.revisions`` and shown by the report); {} when the benchmark pins nothing."""
        ...

    def scripted_task(self, text: str) -> ScriptedTask | None:
        """The scripted policy's view of a question text when it is one of this benchmark's tasks with an
        answer shape of its own (None: an ordinary question)."""
        ...

    def judge(self, req: JudgeRequest, summary: JudgeSummary) -> None:
        """Grade every finished run under ``req.root`` and cache the verdicts in ``judgement.json``,
        adding the counts to ``summary`` (default: :func:`.grading.judge_answers`, exact match + F1 or
        the LLM judge)."""
        ...

    def report_sections(self) -> Sequence[Placed]:
        """The benchmark's report sections (each builder returns None when the report has no runs for it)
        and where they go; their ``metrics`` are extra keys of metrics.json."""
        ...


class QuestionAnswer:
    """Defaults for a question/answer benchmark (a plugin subclasses it and sets what differs): no
    default source, claims no bare path, no splits, the configured world, no scripted answer shape, graded
    by :func:`.grading.judge_answers`, no report section of its own."""

    kind: str = ""
    summary: str = ""
    has_splits: bool = False
    judge_preset: str = "llm-equivalence"
    presets: Sequence[Preset] = ()

    def default_source(self) -> Path | None:
        return None

    def claims(self, path: Path) -> bool:
        return False

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:  # pragma: no cover
        raise NotImplementedError

    def world(self, source: Path, corpus_dir: Path | None, log: Log | None, config: RunConfig) -> WorldPlan:
        return WorldPlan()

    def revisions(self, source: Path) -> dict[str, Any]:
        return {}

    def scripted_task(self, text: str) -> ScriptedTask | None:
        return None

    def judge(self, req: JudgeRequest, summary: JudgeSummary) -> None:
        judge_answers(req, summary)

    def report_sections(self) -> Sequence[Placed]:
        return ()


# --- reading ------------------------------------------------------------------------------------------
def read_csv(path: Path, what: str, delimiter: str = ",") -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """A dataset's CSV (or TSV) file: its column names and its rows, each with the file line it starts on
    (a quoted cell may span lines). UTF-8, a byte-order mark dropped; ConfigError naming ``what`` (the
    benchmark) when it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as e:
        raise ConfigError(f"{what}: cannot read {path}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what}: {path} is not UTF-8 text ({e.reason} at byte {e.start})") from e
    csv.field_size_limit(min(sys.maxsize, 1 << 30))
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    names = list(reader.fieldnames or [])
    rows: list[tuple[int, dict[str, str]]] = []
    end = reader.line_num
    try:
        for row in reader:
            rows.append((end + 1, row))
            end = reader.line_num
    except csv.Error as e:
        raise ConfigError(f"{path}:{reader.line_num}: not a readable {what} file ({e})") from e
    return names, rows


def require_fields(have: Collection[str], required: Iterable[str], where: str, what: str) -> None:
    """ConfigError ``{where}: not {what} (missing …)`` when ``have`` lacks any of ``required``: ``have`` is
    a file's column names (``missing columns: a, b``) or one row's object (a Mapping: ``missing a, b``).
    ``where`` is ``file:line``; the missing names come in ``required``'s order, one with a space quoted."""
    missing = [k if " " not in k else repr(k) for k in required if k not in have]
    if missing:
        label = "" if isinstance(have, Mapping) else "columns: "
        raise ConfigError(f"{where}: not {what} (missing {label}{', '.join(missing)})")


# --- ids and selection ---------------------------------------------------------------------------------
def question_id(text: str) -> str:
    """The id of a question that has none: 16 hex digits of SHA-256 of its text."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def safe_id(raw: str) -> str:
    """A dataset id made safe as a directory name (unsafe runs become ``_``; never empty or dot-only)."""
    s = _SAFE.sub("_", str(raw)).strip("._")[:100]
    return s or question_id(str(raw))


def select(
    questions: list[Question], *, limit: int | None = None, sample: int | None = None, seed: int = 0
) -> list[Question]:
    """``sample`` draws N questions at random with ``seed`` (kept in dataset order), then ``limit`` keeps
    the first N. Duplicate ids get a ``-2``, ``-3`` … suffix so every run directory is distinct."""
    for name, v in (("limit", limit), ("sample", sample)):
        if v is not None and v < 0:
            raise ConfigError(f"--{name} must be >= 0 (got {v})")
    picked = list(questions)
    if sample is not None and sample < len(picked):
        idx = sorted(random.Random(seed).sample(range(len(picked)), sample))
        picked = [picked[i] for i in idx]
    if limit is not None:
        picked = picked[:limit]
    seen: dict[str, int] = {}
    out: list[Question] = []
    for q in picked:
        n = seen.get(q.id, 0) + 1
        seen[q.id] = n
        out.append(q if n == 1 else q.model_copy(update={"id": f"{q.id}-{n}"}))
    return out
