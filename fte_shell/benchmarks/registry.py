"""THE registry of benchmarks: a dataset spec → its plugin. Adding a benchmark is one module (or package)
holding a ``BENCHMARK`` that satisfies :class:`~.base.Benchmark`, plus one line in :data:`BENCHMARKS`; a
third-party benchmark needs no line: its spec is ``module:attr`` (or ``module:attr:PATH``).

Specs: ``KIND`` (a plugin with a default source: ``hotpotqa``), ``KIND:PATH``, or a bare path, which
the first plugin in :data:`BENCHMARKS` order that claims it reads (WideSearch: a directory holding
``widesearch.jsonl``; GAIA: a directory holding ``metadata.jsonl``; HotpotQA: another directory; BrowseComp:
``*.csv``; JSONL: anything else). The other field benchmarks (xbench, BrowseComp-ZH, HLE, SimpleQA, FRAMES,
WebWalkerQA) need their ``KIND:`` prefix.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from ..config import BenchmarkOptions
from ..errors import ConfigError
from ..plugins import Registry, is_reference
from ..record.sweepdir import SweepDir
from ..version import renamed_line
from .base import Benchmark, Dataset, Log, ScriptedTask, select
from .presets import BUILTIN, FORMER_NAMES_UNTIL, Preset
from .sections import Placed

BENCHMARKS: Registry[Benchmark] = Registry("benchmark", {
    "widesearch": f"{__package__}.widesearch:BENCHMARK",
    "gaia": f"{__package__}.gaia:BENCHMARK",
    "hotpotqa": f"{__package__}.hotpotqa:BENCHMARK",
    "browsecomp": f"{__package__}.browsecomp:BENCHMARK",
    "browsecomp-plus": f"{__package__}.browsecomp_plus:BENCHMARK",
    "browsecomp-zh": f"{__package__}.browsecomp_zh:BENCHMARK",
    "xbench": f"{__package__}.xbench:BENCHMARK",
    "hle": f"{__package__}.hle:BENCHMARK",
    "simpleqa": f"{__package__}.simpleqa:BENCHMARK",
    "frames": f"{__package__}.frames:BENCHMARK",
    "webwalkerqa": f"{__package__}.webwalkerqa:BENCHMARK",
    "jsonl": f"{__package__}.jsonl:BENCHMARK",
})
"""Every benchmark by kind -> the ``BENCHMARK`` of its module (imported on first use); the order is the order
a bare path is offered to them. A third-party benchmark is ``module:attr`` (``mypkg.bench:BENCHMARK``, or
``mypkg.bench:BENCHMARK:PATH`` for a source other than its default)."""

FALLBACK = BENCHMARKS.get("jsonl")
"""Grades a run directory outside any sweep, or a sweep whose manifest names no known benchmark."""

PRESETS: dict[str, Preset] = {**BUILTIN, **{p.name: p for b in BENCHMARKS.values() for p in b.presets}}
"""Every grading preset by name: :data:`.presets.BUILTIN` and the benchmarks' own (``Benchmark.presets``)."""


FORMER: dict[str, str] = {old: p.name for p in PRESETS.values() for old in p.formerly}
"""A preset's former name -> its name now (still accepted, with a note)."""


def preset(name: str) -> Preset:
    """The grading preset ``name`` (a former name too, with a one-line note naming the new one);
    ConfigError listing the known ones otherwise."""
    if name in FORMER:
        print(renamed_line(f"judge preset {name}", f"{FORMER[name]} (what it grades, not a benchmark's name)",
                           FORMER_NAMES_UNTIL), file=sys.stderr, flush=True)
        name = FORMER[name]
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown judge preset {name!r} (known: {', '.join(sorted(PRESETS))})") from None


def get(kind: str) -> Benchmark:
    """The benchmark of ``kind`` (or ``module:attr``); ConfigError listing the known kinds otherwise."""
    return BENCHMARKS.get(kind)


def resolve(spec: str) -> tuple[Benchmark, Path]:
    """The benchmark and source path of a dataset spec (see the module docstring)."""
    _, bm, source = _resolve(spec)
    return bm, source


def _resolve(spec: str) -> tuple[str, Benchmark, Path]:
    """``(name, benchmark, source)``: the name is what finds the benchmark again (its kind, or the
    ``module:attr`` reference of a third-party one), recorded as the dataset's ``kind``."""
    source = BENCHMARKS.get(spec).default_source() if spec in BENCHMARKS else None
    if source is not None:
        return spec, BENCHMARKS.get(spec), source
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in BENCHMARKS:
        return prefix, BENCHMARKS.get(prefix), Path(rest)
    ref, _, rest = spec.rpartition(":")
    if is_reference(spec) or is_reference(ref):
        name = spec if is_reference(spec) else ref
        bm = BENCHMARKS.get(name)
        source = bm.default_source() if is_reference(spec) else Path(rest)
        if source is None:
            raise ConfigError(f"benchmark {spec!r} has no default source: give one as {spec}:PATH")
        return name, bm, source
    path = Path(spec)
    bm = next(b for b in BENCHMARKS.values() if b.claims(path))
    return bm.kind, bm, path


def load_dataset(
    spec: str,
    *,
    split: str = "dev",
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    options: BenchmarkOptions | None = None,
    log: Log | None = None,
) -> Dataset:
    """Load the questions of ``spec`` and select them (``--sample``, then ``--limit``). ``options``: the
    ``[benchmark]`` table the plugin reads (default: every option's default)."""
    name, bm, path = _resolve(spec)
    if not path.exists():
        raise ConfigError(f"dataset not found: {path}")
    return Dataset(
        kind=name,
        source=str(path.resolve()),
        split=split if bm.has_splits else None,
        questions=select(bm.load(path, split, options or BenchmarkOptions(), log), limit=limit, sample=sample, seed=seed),
        revisions=bm.revisions(path),
    )


def of_sweep(sweep_dir: Path | None) -> Benchmark:
    """The benchmark that wrote the sweep at ``sweep_dir`` (its manifest's ``dataset.kind``), else
    :data:`FALLBACK`."""
    kind = SweepDir(sweep_dir).dataset_kind() if sweep_dir is not None else None
    if kind is None or not BENCHMARKS.knows(kind):
        return FALLBACK
    try:
        return BENCHMARKS.get(kind)
    except ConfigError:  # a third-party benchmark no longer importable here: graded as a plain dataset
        return FALLBACK


def scripted_task(text: str) -> ScriptedTask | None:
    """The first benchmark's scripted view of a question text (None: an ordinary question)."""
    return next((t for b in BENCHMARKS.values() if (t := b.scripted_task(text)) is not None), None)


def report_sections() -> Iterator[Placed]:
    """Every benchmark's report sections, in registry order."""
    for b in BENCHMARKS.values():
        yield from b.report_sections()
