"""The config digest: which configuration a run used, as one comparable string (and a file's SHA-256,
:func:`file_sha256`, for checked downloads and cache keys).

``config_digest(cfg)`` is the SHA-256 (64 hex digits) of the canonical JSON (keys sorted, no spaces,
UTF-8) of :func:`canonical_config` — the run's :class:`~fte_shell.config.RunConfig` without what does not
change the agent's behaviour:

* secrets: ``model.api_key``, ``search.serper_api_key``, ``search.embeddings.api_key`` (also inside
  ``agent.summary_model``);
* where things are, not what they are: ``model.base_url`` (the same model moved to another host),
  ``search.embeddings.base_url`` (the same embedder elsewhere), ``search.cache_dir``,
  ``sandbox.workspace_dir``, ``sandbox.keep_workspace``, ``sandbox.auto_build``, ``sandbox.corpus_cache``;
* transport tuning: ``model.timeout_s``, ``model.max_retries``, ``model.backoff_s``, ``model.rpm``,
  ``model.tpm``, ``search.timeout_s``, ``search.max_retries``, ``search.embeddings.timeout_s``,
  ``search.embeddings.max_retries``;
* what ranks a local corpus when there is none: ``search.retriever`` and ``search.embeddings`` without a
  ``search.corpus`` (a web search has no retriever);
* what things cost: ``model.price``.

Files that are inputs are replaced by their content: ``agent.system_prompt_file`` and
``agent.tool_descriptions_file`` become ``sha256:<hex of the file>``, and a local ``search.corpus``
becomes ``fingerprint:<the index's content fingerprint>`` (its meta.json), and so does ``sandbox.corpus``.
The sandbox's provider tables (``[sandbox.docker]`` …) are folded back into ``[sandbox]`` as the flat table
digests were written with before the tables existed (:data:`PROVIDER_TABLES`). Everything else — model name,
sampling, ``max_tokens``, ``extra_body``, every agent and profile setting (``agent.profile`` included),
sandbox limits, the fetch policy, the search backend — is in. Fields added to the config later are in
unless listed here; keys added after digests were first written are left out while they hold the value
every earlier run had (:data:`DEFAULTED`, also inside ``agent.summary_model``; ``search.retriever`` while it is
``bm25s``, the ranking of every run before retrievers, and ``search.embeddings`` while it holds its defaults),
and ``agent.context`` is left out whole while its strategy is ``keep_all`` (which ignores its other keys). The ``[judge]`` table (how
runs are graded afterwards), the ``[benchmark]`` table (dataset plugin options: what they change shows in
the dataset, ``questions.jsonl``, and in the search settings the sweep fills in) and the ``[budget]`` table
(what a sweep may spend) are out as a whole.
docs/bench.md "Config digest".
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

DROPPED: dict[str, tuple[str, ...]] = {
    "model": ("api_key", "base_url", "timeout_s", "max_retries", "backoff_s", "price", "rpm", "tpm"),
    "search": ("serper_api_key", "cache_dir", "timeout_s", "max_retries"),
    "embeddings": ("api_key", "base_url", "timeout_s", "max_retries"),
    "sandbox": ("workspace_dir", "keep_workspace", "auto_build", "corpus_cache"),
}
"""Keys left out of the digest, by table (``agent.summary_model`` is a model table too; ``embeddings`` is
``search.embeddings``)."""

DEFAULTED: dict[str, dict[str, Any]] = {
    "sandbox": {"provider": "docker", "runtime": "runc", "rootfs": None, "rootfs_cache": None, "cgroup_parent": None,
                "corpus": None},
    "agent": {"max_total_tokens": None, "stuck_repeats": None},
    "model": {"api": "chat", "store": False, "reasoning_effort": None, "server": None, "thinking": None},
    "search": {"retriever": "bm25s"},
}
"""Keys added after digests were first written, left out while they hold the value every earlier run
had, so those runs' digests still compare equal."""

EMBEDDINGS_DEFAULTS: dict[str, Any] = {"query_prefix": None, "normalize": True, "batch_size": 64, "max_length": 512,
                                       "prebuilt": None}
"""``[search.embeddings]``'s defaults without its dropped keys (what every run before the table had): the
table is left out while it equals them (tests/test_config.py checks they match the config model)."""

OUT_TABLES: tuple[str, ...] = ("judge", "benchmark", "budget")
"""Tables left out of the digest as a whole (how runs are graded; dataset plugin options; what a sweep may
spend: a higher budget resumes the same sweep)."""

PROVIDER_TABLES: tuple[str, ...] = ("docker", "podman", "bwrap")
"""``[sandbox]``'s provider tables (the names of ``config.SandboxProviderName``, in that order). Their keys
are folded back into ``[sandbox]``: the chosen provider's table first, then the others' keys not yet there
(so a key two tables have takes the chosen provider's value, else the first table's, as
``config.sandbox.moved_table`` places an old config's key)."""

INPUT_FILES: tuple[str, ...] = ("system_prompt_file", "tool_descriptions_file")
"""``agent`` keys naming files whose content is what matters."""


def _file_digest(path: str) -> str:
    try:
        return "sha256:" + hashlib.sha256(Path(path).expanduser().read_bytes()).hexdigest()
    except OSError:
        return f"unreadable:{path}"


def _corpus_fingerprint(path: str) -> str:
    try:
        meta = json.loads((Path(path).expanduser() / "meta.json").read_text())
        return f"fingerprint:{meta['fingerprint']}"
    except (OSError, ValueError, KeyError, TypeError):
        return f"unreadable:{path}"


def _fold_provider_tables(sandbox: dict[str, Any]) -> None:
    tables = {name: sandbox.pop(name) for name in PROVIDER_TABLES if isinstance(sandbox.get(name), dict)}
    chosen = sandbox.get("provider", "docker")
    for name in sorted(tables, key=lambda n: (n != chosen, PROVIDER_TABLES.index(n))):
        for k, v in tables[name].items():
            sandbox.setdefault(k, v)


def _drop(table: Any, keys: tuple[str, ...]) -> None:
    if isinstance(table, dict):
        for k in keys:
            table.pop(k, None)


def canonical_config(config: Any) -> dict[str, Any]:
    """The behaviour-relevant part of a run configuration (a ``RunConfig`` or its JSON dump), as a
    plain dict (see the module docstring)."""
    if hasattr(config, "model_dump"):
        data = config.model_dump(mode="json")
    else:
        data = copy.deepcopy(dict(config))
    for table in OUT_TABLES:
        data.pop(table, None)
    if isinstance(data.get("sandbox"), dict):
        _fold_provider_tables(data["sandbox"])
    for table, keys in DROPPED.items():
        _drop(data.get(table), keys)
    for table, defaults in DEFAULTED.items():
        t = data.get(table)
        if isinstance(t, dict):
            _drop(t, tuple(k for k, v in defaults.items() if t.get(k) == v))
    agent = data.get("agent")
    if isinstance(agent, dict):
        if isinstance(agent.get("context"), dict) and agent["context"].get("strategy") == "keep_all":
            agent.pop("context")  # keep_all ignores the other keys: the runs before [agent.context] existed
        summary = agent.get("summary_model")
        _drop(summary, DROPPED["model"])
        if isinstance(summary, dict):
            _drop(summary, tuple(k for k, v in DEFAULTED["model"].items() if summary.get(k) == v))
        for k in INPUT_FILES:
            if agent.get(k):
                agent[k] = _file_digest(str(agent[k]))
    sandbox = data.get("sandbox")
    if isinstance(sandbox, dict) and sandbox.get("corpus"):
        sandbox["corpus"] = _corpus_fingerprint(str(sandbox["corpus"]))
    search = data.get("search")
    if isinstance(search, dict):
        if search.get("corpus"):
            search["corpus"] = _corpus_fingerprint(str(search["corpus"]))
            embeddings = search.get("embeddings")
            _drop(embeddings, DROPPED["embeddings"])
            if embeddings == EMBEDDINGS_DEFAULTS:
                search.pop("embeddings")
        else:  # no local corpus: nothing for a retriever to rank
            _drop(search, ("retriever", "embeddings"))
    return data


def digest_of(canonical: dict[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of an already canonical dict."""
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def config_digest(config: Any) -> str:
    """``sha256`` (64 hex digits) of the canonical JSON of :func:`canonical_config` of ``config``."""
    return digest_of(canonical_config(config))


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: data}


def config_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two canonical configs, one ``key: old -> new`` line per changed key
    (dotted key names, sorted)."""
    a, b = _flatten(old), _flatten(new)
    missing = object()
    lines = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k, missing), b.get(k, missing)
        if va != vb:
            fa = "(unset)" if va is missing else json.dumps(va, ensure_ascii=False)
            fb = "(unset)" if vb is missing else json.dumps(vb, ensure_ascii=False)
            lines.append(f"{k}: {fa} -> {fb}")
    return lines


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 4 MiB blocks (hex)."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()
