"""THE sweep directory (format: docs/bench.md): every reader and writer of its files goes through here.

::

    OUT/
      sweep.json        manifest (:class:`SweepManifest`): dataset, profiles, runs, config snapshot (secrets
                        masked), digests, status, counts, sandboxes
      questions.jsonl   the selected questions with their gold answers (the judge and the report read them)
      failures.jsonl    one line per attempt that ended for an infrastructure reason (not a result)
      runs/<arm>/<qid>/r<k>/   one run directory each (:mod:`.rundir`); the arm is the profile, or
                        ``profile@strategy`` for a context strategy other than keep_all (``fte@discard_all``),
                        or ``profile@retriever[+strategy]`` in a sweep of retrievers (``fte@bm25s+discard_all``)
      shared/           caches shared by the sweep's runs (pages, searches, corpus index, snapshot)
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import FteError
from .jsonio import (
    dumps,
    naming_full_disk,
    read_json,
    read_jsonl_lenient,
    write_json_atomic,
    write_jsonl_atomic,
)
from .rundir import arm_name, find_runs

MANIFEST = "sweep.json"
QUESTIONS = "questions.jsonl"
FAILURES = "failures.jsonl"
RUNS = "runs"
SHARED = "shared"


class ManifestError(FteError):
    """A ``sweep.json`` that is JSON but not a sweep manifest (a field of the wrong type)."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)


class ManifestDataset(_Record):
    """The dataset a sweep runs (``fte_shell.benchmarks.base.Dataset`` without its questions)."""

    kind: str | None = None
    """The benchmark that loaded it (``hotpotqa``, ``browsecomp``…; its registry name)."""
    source: str | None = None
    """Where the questions were read from (a path or a spec)."""
    split: str | None = None
    """The split (HotpotQA: ``dev``/``test``)."""
    revisions: dict[str, Any] = Field(default_factory=dict)
    """Which data the sweep ran on (``{part: pin}``: BrowseComp-Plus's ``dataset`` and ``corpus``, each a
    Hugging Face revision or a content hash); absent when the benchmark pins nothing."""


class ConfigChange(_Record):
    """One resume with a changed configuration (``--allow-config-change``)."""

    at: str
    """When (ISO 8601, UTC)."""
    from_digest: str
    """The sweep's ``config_digest`` before."""
    to_digest: str
    """And after."""
    changes: list[str] = Field(default_factory=list)
    """Each changed key, ``key: old -> new``."""


class SweepManifest(_Record):
    """``sweep.json`` (format: docs/bench.md "Sweep directory"). Keys this version does not name are kept
    (``extra="allow"``): a manifest written by an older or newer version opens and is written back whole.
    The bench options, the configuration and the counts are kept as the JSON they were written as: their
    models (``BenchConfig``, ``RunConfig``, ``SweepStats``) belong to layers above this one or refuse keys
    of other versions."""

    dataset: ManifestDataset = Field(default_factory=ManifestDataset)
    """The dataset (kind, source, split, …)."""
    questions: int = 0
    """Questions selected."""
    bench: dict[str, Any] = Field(default_factory=dict)
    """The bench options (``fte_shell.sweep.config.BenchConfig``, as JSON)."""
    profiles: list[str] = Field(default_factory=list)
    """Profiles compared."""
    runs: int = 1
    """Repetitions per (question, profile)."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The ``RunConfig`` the runs use (secrets masked)."""
    config_digest: str | None = None
    """Digest of the sweep's configuration without the profile (docs/bench.md "Config digest")."""
    run_config_digests: dict[str, str] = Field(default_factory=dict)
    """``{arm: config_digest}``: what each arm's runs carry in ``result.json``; the arm is the profile, or
    ``profile@strategy`` for a context strategy other than keep_all (:func:`fte_shell.record.rundir.arm_name`)."""
    retrievers: list[str] = Field(default_factory=list)
    """The retrievers compared (``bench --retrievers``: their specs), each run with every profile and
    context strategy; empty when the sweep has no retriever axis (its runs use ``[search] retriever``)."""
    contexts: list[str] = Field(default_factory=list)
    """The context strategies compared (their labels, ``keep_all``, ``keep_recent:5``…; ``bench --context``),
    each run with every profile; absent in manifests written before the context axis (keep_all alone)."""
    config_canonical: dict[str, Any] | None = None
    """What ``config_digest`` covers (None in manifests written before it was kept)."""
    config_changes: list[ConfigChange] = Field(default_factory=list)
    """Every resume with a changed configuration, oldest first."""
    started_at: str | None = None
    """When the sweep first started (ISO 8601, UTC)."""
    updated_at: str | None = None
    """When this file was last written."""
    status: str = "running"
    """A :data:`fte_shell.stops.SweepStatus` (a ``str`` here, so that a newer version's status still opens)."""
    stats: dict[str, Any] | None = None
    """The counts of the last invocation (``fte_shell.sweep.config.SweepStats``, as JSON)."""
    search: dict[str, Any] = Field(default_factory=dict)
    """How the search backend is named: ``{"backend": its plugin's name ("local", "serper", "pkg.mod:Class"),
    "recorded_as": {retriever or "": the name its searches are recorded under}}`` (docs/search.md)."""
    sandboxes: dict[str, int] = Field(default_factory=dict)
    """``{"provider/runtime": shell runs done with it}`` (a Ray node may choose its own provider)."""

    def dump(self) -> dict[str, Any]:
        """The manifest as the JSON object written (the keys it was read with, or built with)."""
        return self.model_dump(mode="json", exclude_unset=True)


class SweepDir:
    """One sweep directory ``OUT``. Thread-safe appends to ``failures.jsonl``."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._lock = threading.Lock()

    # --- paths ------------------------------------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    @property
    def questions_path(self) -> Path:
        return self.root / QUESTIONS

    @property
    def failures_path(self) -> Path:
        return self.root / FAILURES

    @property
    def shared(self) -> Path:
        return self.root / SHARED

    @property
    def runs_dir(self) -> Path:
        return self.root / RUNS

    def run_dir(self, profile: str, qid: str, rep: int, context: str = "keep_all", retriever: str | None = None,
                corpus: bool = False) -> Path:
        """``OUT/runs/<arm>/<qid>/r<rep>``: the arm is the profile, or ``profile@strategy`` for a context
        strategy (its label) other than keep_all, ``profile@retriever[+strategy]`` in a sweep of retrievers
        (:func:`fte_shell.record.rundir.arm_name`)."""
        return self.runs_dir / arm_name(profile, context, retriever, corpus) / qid / f"r{rep}"

    def runs(self) -> list[tuple[Path, str | None, str | None, int]]:
        """Every run directory: (dir, profile, qid, rep)."""
        return find_runs(self.root)

    # --- the manifest -----------------------------------------------------------------------------------
    def manifest(self) -> SweepManifest | None:
        """``sweep.json``, or None when there is none (or it is not JSON); :class:`ManifestError` when its
        fields do not fit :class:`SweepManifest`."""
        data = read_json(self.manifest_path)
        if data is None:
            return None
        try:
            return SweepManifest.model_validate(data)
        except ValidationError as e:
            raise ManifestError(f"{self.manifest_path} is not a sweep manifest fte-shell can read: "
                                f"{e.errors()[0]['loc']}: {e.errors()[0]['msg']}") from None

    def write_manifest(self, manifest: SweepManifest) -> None:
        """Write ``sweep.json`` atomically."""
        write_json_atomic(self.manifest_path, manifest.dump())

    def dataset_kind(self) -> str | None:
        """The manifest's ``dataset.kind`` (which benchmark wrote the sweep), or None."""
        m = self.manifest()
        return m.dataset.kind or None if m is not None else None

    # --- questions --------------------------------------------------------------------------------------
    def questions(self) -> dict[str, dict[str, Any]]:
        """``{qid: row}`` of ``questions.jsonl`` (rows as written: ``id``, ``question``, ``answer``, ``meta``…)."""
        return {str(r["id"]): r for r in read_jsonl_lenient(self.questions_path) if "id" in r}

    def write_questions(self, rows: list[dict[str, Any]]) -> None:
        """Merge ``rows`` into ``questions.jsonl`` by ``id`` (atomically)."""
        known = self.questions()
        for r in rows:
            known[str(r["id"])] = r
        self.root.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(self.questions_path, known.values())

    # --- failures ---------------------------------------------------------------------------------------
    def add_failure(self, row: dict[str, Any]) -> None:
        """Append one line to ``failures.jsonl`` (thread-safe)."""
        with self._lock, naming_full_disk(self.failures_path), self.failures_path.open("a", encoding="utf-8") as f:
            f.write(dumps(row) + "\n")


def sweep_root(path: Path) -> Path | None:
    """The sweep directory (holding ``sweep.json``) that is ``path`` or lies above it, if any."""
    for p in [path, *path.parents]:
        if SweepDir(p).manifest_path.exists():
            return p
    return None
