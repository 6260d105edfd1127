"""The config digest: which configuration a run used, as one comparable string (and a file's SHA-256,
:func:`file_sha256`, for checked downloads and cache keys).

``config_digest(cfg)`` is the SHA-256 (64 hex digits) of the canonical JSON (keys sorted, no spaces,
UTF-8) of :func:`canonical_config` — the run's :class:`~fte_shell.config.RunConfig` without what does not
change the agent's behaviour:

* secrets: every row of :data:`fte_shell.config.SECRETS` (``model.api_key``, ``search.serper_api_key``,
  ``search.embeddings.api_key``; a model's also inside ``agent.summary_model``);
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
digests were written with before the tables existed (``config.sandbox.PROVIDER_TABLES``). Everything else — model name,
sampling, ``max_tokens``, ``extra_body``, every agent and profile setting (``agent.profile`` included),
sandbox limits, the fetch policy, the search backend — is in. A key the first digests did not have
(every key not in :data:`KEYS_ALWAYS_IN`, frozen) is left out while it holds its default, read from the
config models (:data:`EARLIER` where that default has changed since): a key added to a model never changes
an older run's digest (tests/test_digest_keys.py). So ``search.embeddings`` is left out while it holds its
defaults, ``search.retriever`` while it is ``bm25s``, and ``agent.context`` is left out whole while its
strategy is ``keep_all`` (which ignores its other keys). The ``[judge]`` table (how runs are graded afterwards), the ``[benchmark]`` table (dataset plugin options: what they change shows in
the dataset, ``questions.jsonl``, and in the search settings the sweep fills in) and the ``[budget]`` table
(what a sweep may spend) are out as a whole.
docs/bench.md "Config digest".
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from .config import SECRETS, RunConfig
from .config.sandbox import PROVIDER_TABLES
from .config.search import LEGACY_RETRIEVER

DROPPED: dict[str, tuple[str, ...]] = {
    "model": ("base_url", "timeout_s", "max_retries", "backoff_s", "price", "rpm", "tpm"),
    "search": ("cache_dir", "timeout_s", "max_retries"),
    "search.embeddings": ("base_url", "timeout_s", "max_retries"),
    "sandbox": ("workspace_dir", "keep_workspace", "auto_build", "corpus_cache"),
}
"""Keys left out of the digest, by table, besides the secrets (:data:`fte_shell.config.SECRETS`); a
``model`` table's are also left out of ``agent.summary_model``."""

_MODEL_KEYS = ("call_time_cap_s context_margin context_window extra_body max_tokens min_reply_tokens model "
               "parse_text_tool_calls presence_penalty reasoning_passback temperature timeout_retries top_p")

KEYS_ALWAYS_IN: dict[str, frozenset[str]] = {table: frozenset(keys.split()) for table, keys in {
    "": "model agent sandbox search snapshot",
    "model": _MODEL_KEYS,
    "agent": "current_date first_tool_choice grep_context grep_line_chars grep_max_context grep_max_matches "
             "grep_timeout_s max_consecutive_errors max_nudges max_repeated_replies max_turns on_context_overflow "
             "open_window_bytes open_window_lines profile read_max_bytes read_max_lines search_max_results "
             "summary_model system_prompt_file time_budget_s tool_descriptions_file visit_snippet_chars visit_summary_page_chars",
    "agent.summary_model": _MODEL_KEYS,
    "agent.standard": "",
    "agent.context": "fraction keep keep_recent_every_turn strategy summary_model trigger trigger_tokens",
    "agent.context.summary_model": "api api_key backoff_s base_url call_time_cap_s context_margin context_window "
                                   "extra_body max_retries max_tokens min_reply_tokens model parse_text_tool_calls "
                                   "presence_penalty price reasoning_effort reasoning_passback rpm server store "
                                   "temperature thinking timeout_retries timeout_s top_p tpm",
    "sandbox": "base_image cap_drop_all command_timeout_s cpus env fetch_policy image init memory network_mode "
               "no_new_privileges output_buffer_size output_cap_bytes pids_limit protect_warden read_only_root "
               "tmpfs_size total_time_budget_s ttl_s user",
    "sandbox.fetch_policy": "allow_hosts allow_private deny_hosts max_bytes max_fetches max_redirects max_requests "
                            "max_total_bytes render_js timeout_s user_agent",
    "search": "backend corpus num_results open_web serper_url",
    "search.embeddings": "",
    "snapshot": "dir manifest mode on_miss",
}.items()}
"""Frozen: the keys of each table (dotted; ``""`` is the top) that digests keep whatever their value —
what digests were written with before keys began to be added (the keys of the first recorded sweeps,
tests/fixtures/v0, and of ``agent.context`` as it came). Never add a key to it: every other key, in a table
here or a table added later (``search.embeddings``, ``agent.standard``: listed with no key, to be looked
into), is left out while it holds its default (read from the config models, :data:`EARLIER` where the
default has changed since), so a digest written before the key existed still compares equal
(tests/test_fixtures_v0.py resumes such a sweep). Only these tables are looked into; other dict values
(``extra_body``, ``sandbox.env``, ``search.options``) are compared whole."""

EARLIER: dict[str, Any] = {"agent.stuck_repeats": None, "search.retriever": LEGACY_RETRIEVER}
"""A key added later whose model default has changed since: the value every run before the key had (left
out while it holds that, not the default)."""

OUT_TABLES: tuple[str, ...] = ("judge", "benchmark", "budget")
"""Tables left out of the digest as a whole (how runs are graded; dataset plugin options; what a sweep may
spend: a higher budget resumes the same sweep)."""

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


def _fold_provider_tables(sandbox: dict[str, Any], chosen: Any = None) -> None:
    """The provider tables' keys folded back into ``[sandbox]``: the chosen provider's table first, then the
    others' keys not yet there (so a key two tables have takes the chosen provider's value, else the first
    table's, as ``config.sandbox.moved_table`` places an old config's key)."""
    tables = {name: sandbox.pop(name) for name in PROVIDER_TABLES if isinstance(sandbox.get(name), dict)}
    chosen = chosen or sandbox.get("provider", "docker")
    for name in sorted(tables, key=lambda n: (n != chosen, PROVIDER_TABLES.index(n))):
        for k, v in tables[name].items():
            sandbox.setdefault(k, v)


def _drop(table: Any, keys: tuple[str, ...]) -> None:
    if isinstance(table, dict):
        for k in keys:
            table.pop(k, None)


def _at(data: Any, table: str) -> Any:
    for name in table.split("."):
        data = data.get(name) if isinstance(data, dict) else None
    return data


_DROPPED = {table: (*keys, *(s.key for s in SECRETS if s.table == table)) for table, keys in DROPPED.items()}
_DROPPED["agent.summary_model"] = _DROPPED["model"]


def _model_defaults(cls: type[BaseModel]) -> dict[str, Any] | None:
    """``cls()`` as JSON, with an unset sub-table (``agent.summary_model``) as its model's defaults (None:
    the model has required keys, so no defaults)."""
    try:
        return _with_sub_tables(cls().model_dump(mode="json"), cls)
    except ValidationError:
        return None


def _with_sub_tables(out: dict[str, Any], cls: type[BaseModel]) -> dict[str, Any]:
    for name, field in cls.model_fields.items():
        union = get_origin(field.annotation) in (Union, UnionType)
        sub = [a for a in (field.annotation, *(get_args(field.annotation) if union else ()))
               if isinstance(a, type) and issubclass(a, BaseModel)]
        if sub and out.get(name) is None:
            out[name] = _model_defaults(sub[0])
        elif sub and isinstance(out.get(name), dict):
            _with_sub_tables(out[name], sub[0])
    return out


def _leave_out_defaults(data: dict[str, Any], defaults: Any, table: str = "") -> None:
    """Leave out each key of ``data`` not in :data:`KEYS_ALWAYS_IN` while it holds its default."""
    known = KEYS_ALWAYS_IN.get(table, frozenset())
    missing = object()
    for k in list(data):
        path = f"{table}.{k}" if table else k
        default = EARLIER.get(path, defaults.get(k, missing) if isinstance(defaults, dict) else missing)
        if isinstance(data[k], dict) and path in KEYS_ALWAYS_IN:
            _leave_out_defaults(data[k], default, path)
            if isinstance(default, dict):  # compared as a digest has it: its later keys left out too
                default = copy.deepcopy(default)
                _leave_out_defaults(default, copy.deepcopy(default), path)
        if k not in known and data[k] == default:
            del data[k]


def _canonical(data: dict[str, Any], chosen: Any = None) -> dict[str, Any]:
    """OUT_TABLES, provider tables folded, DROPPED and secrets (the same for a config and for the defaults)."""
    for table in OUT_TABLES:
        data.pop(table, None)
    if isinstance(data.get("sandbox"), dict):
        _fold_provider_tables(data["sandbox"], chosen)
    for table, keys in _DROPPED.items():
        _drop(_at(data, table), keys)
    return data


@functools.lru_cache(maxsize=16)
def _canonical_defaults(model: type[BaseModel], chosen: str) -> dict[str, Any]:
    """The model's defaults in the digest's form (read only: :func:`_leave_out_defaults` copies)."""
    return _canonical(_model_defaults(model) or {}, chosen)


def canonical_config(config: Any, model: type[BaseModel] | None = None) -> dict[str, Any]:
    """The behaviour-relevant part of a run configuration (a ``RunConfig`` or its JSON dump), as a
    plain dict (see the module docstring). ``model``: the configuration's model, whose defaults are left
    out of the keys added later (default: ``config``'s own class, or :class:`~fte_shell.config.RunConfig`)."""
    if isinstance(config, BaseModel):
        data = config.model_dump(mode="json")
    else:
        data = copy.deepcopy(dict(config))
    model = model or (type(config) if isinstance(config, BaseModel) else RunConfig)
    chosen = _at(data, "sandbox.provider") or "docker"
    _canonical(data)
    _leave_out_defaults(data, _canonical_defaults(model, str(chosen)))
    agent = data.get("agent")
    if isinstance(agent, dict):
        if isinstance(agent.get("context"), dict) and agent["context"].get("strategy") == "keep_all":
            agent.pop("context")  # keep_all ignores the other keys: the runs before [agent.context] existed
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
