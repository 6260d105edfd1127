"""Configuration: pydantic models with ``extra="forbid"``, one docstring per field.

A TOML file mirrors these models table for table::

    [model]                 # ModelConfig
    [agent]                 # AgentConfig
    [sandbox]               # SandboxConfig
    [sandbox.fetch_policy]  # FetchPolicy
    [search]                # SearchConfig
    [snapshot]              # SnapshotConfig

Unknown keys are an error that names the key. Flags and environment variables override the file
(see :func:`load_config`).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from .errors import ConfigError


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)


class FetchPolicy(_Model):
    """What the fetch gateway may reach and how much it may download for one question."""

    allow_private: list[str] = Field(default_factory=list)
    """Hosts (``host`` or ``host:port``) that may be reached although they resolve to a loopback, private
    or otherwise non-public address. Needed for loopback test servers; empty by default."""

    allow_hosts: list[str] = Field(default_factory=list)
    """If not empty, only hosts matching one of these patterns may be fetched. A pattern is a host name,
    ``*.example.com`` (the domain and its subdomains) or an fnmatch glob."""

    deny_hosts: list[str] = Field(default_factory=list)
    """Hosts matching any of these patterns are refused (same syntax as ``allow_hosts``); e.g. keep
    benchmark answer pages out. Deny wins over allow."""

    max_bytes: int = 10_000_000
    """Cap on the raw (decompressed) bytes of one response; the body is streamed and cut at this size."""

    timeout_s: float = 30.0
    """Wall-clock limit for one fetch, connection through last byte, redirects included."""

    max_redirects: int = 5
    """Redirects followed per fetch; every hop is checked against the policy again."""

    max_fetches: int = 100
    """Pages a question may newly fetch (already-held pages do not count)."""

    max_total_bytes: int = 200_000_000
    """Raw bytes a question may download in total."""

    max_requests: int = 300
    """Downloads a question may attempt, failed and refused ones included: every fetch not served from
    the workspace, the local corpus or the page cache counts. Bounds how hard an agent can hammer servers
    with failing fetches (``max_fetches`` counts only successes)."""

    user_agent: str = "fte-shell/0.1 (+https://github.com/fte-shell/fte-shell; research search agent)"
    """User-Agent header sent with every request."""

    render_js: bool = False
    """Opt-in: render HTML pages with a headless Chromium (Debian's ``chromium``) over CDP before
    conversion. Slower (about 1.6 s and 0.9 GB per page); off by default."""


SandboxProviderName = Literal["docker"]
"""The sandbox providers (each is the module ``fte_shell.sandbox.<name>.provider``)."""


class SandboxConfig(_Model):
    """The per-question Docker container and its persistent bash session."""

    provider: SandboxProviderName = "docker"
    """What runs the sandbox: ``docker`` (a hardened container per question)."""

    image: str = "fte-shell-sandbox:latest"
    """Sandbox image tag; built from ``Dockerfile.sandbox`` when missing (if ``auto_build``)."""

    base_image: str = "debian:bookworm-slim"
    """Base image passed to the build as ``BASE_IMAGE`` (create it offline with
    ``sandbox/bootstrap-base.sh`` when no registry is reachable)."""

    auto_build: bool = True
    """Build the image the first time it is needed (a visible message is printed)."""

    user: str = "1000:1000"
    """User (uid:gid) the shell runs as inside the container. Never root."""

    read_only_root: bool = True
    """Mount the container's root filesystem read-only."""

    tmpfs_size: str = "256m"
    """Size cap of the writable scratch tmpfs at /tmp (also HOME)."""

    memory: str = "1g"
    """Memory limit of the container; swap is disabled (memswap = memory)."""

    cpus: float = 1.0
    """CPU quota in cores."""

    pids_limit: int = 256
    """Maximum number of processes/threads in the container (contains fork bombs)."""

    network_mode: Literal["none"] = "none"
    """The container has no network; its only way out is the gateway socket."""

    cap_drop_all: bool = True
    """Drop all Linux capabilities."""

    no_new_privileges: bool = True
    """Set ``no-new-privileges`` (setuid binaries cannot raise privileges)."""

    init: bool = True
    """Run an init process (tini) as PID 1's parent to reap zombies."""

    protect_warden: bool = True
    """Run the warden (dead-man timer and timeout enforcer) as the container's PID 1. The kernel shields
    a namespace's PID 1 from signals sent inside it, so an agent's ``pkill -f warden`` or ``kill -9 -1``
    cannot end the sandbox; the warden then reaps zombies itself and docker's ``init`` is not added.
    False: docker's init (when ``init``) is PID 1 and the warden its child, which the agent can kill."""

    ttl_s: int = 6 * 3600
    """Dead-man timer: the container exits by itself this many seconds after start, even if the harness
    was SIGKILLed; ``fte-shell sandbox gc`` removes it."""

    command_timeout_s: float = 30.0
    """Default per-command timeout; the command's whole process tree is killed inside the container."""

    output_cap_bytes: int = 50_000
    """Observation cap: longer output is cut to a head and a tail with a line stating what was omitted."""

    output_buffer_size: str = "16m"
    """Size of the private tmpfs that receives a command's raw output inside the container. Output past
    it is discarded (the writer gets "No space left on device"), so unbounded output (``yes``) can fill
    neither memory nor disk; the observation still shows a head, a tail and the omitted byte count."""

    total_time_budget_s: float | None = None
    """Optional wall-clock budget for all commands of this sandbox together; None = unlimited."""

    workspace_dir: Path | None = None
    """Host directory mounted read-only at /work. None = a fresh temporary directory per sandbox."""

    keep_workspace: bool = False
    """Keep a temporary workspace directory after the sandbox closes (a given ``workspace_dir`` is
    always kept)."""

    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the shell. Host variables never enter the container."""

    fetch_policy: FetchPolicy = Field(default_factory=FetchPolicy)
    """Network policy of this sandbox's fetch gateway."""


class SearchConfig(_Model):
    """Where ``search`` gets its results."""

    backend: Literal["auto", "serper", "local", "none"] = "auto"
    """``serper`` (web, needs a key), ``local`` (a bm25s index built by ``fte-shell corpus build``),
    ``none`` (no search tool), or ``auto``: serper when a key is set, else local when ``corpus`` is set."""

    serper_api_key: SecretStr | None = None
    """Serper API key; defaults to the ``SERPER_API_KEY`` environment variable. Stays on the host."""

    serper_url: str = "https://google.serper.dev/search"
    """Serper endpoint (POST, header ``X-API-KEY``, body ``{q, num}``)."""

    corpus: Path | None = None
    """Directory of a local corpus index (made by ``fte-shell corpus build``)."""

    num_results: int = 10
    """Default number of results per query."""

    timeout_s: float = 20.0
    """Timeout of one search request."""

    max_retries: int = 3
    """Serper: retries on 429, 5xx, timeouts and connection errors, with exponential backoff."""

    cache_dir: Path | None = None
    """Directory caching results per (backend, query, n), so every profile of a comparison sees the same
    results. None = no cache across runs (results are still cached within one question)."""

    open_web: bool = False
    """With a local corpus, let fetch reach URLs outside it (live, or from the snapshot). False (the
    default): a run over a local corpus is a closed world; a URL the corpus does not hold is refused."""


class SnapshotConfig(_Model):
    """The web as a WARC archive: every page and search recorded, runs replayed from it (docs/snapshots.md)."""

    dir: Path | None = None
    """Snapshot directory (WARC files + index). None = no snapshot."""

    mode: Literal["record", "replay", "refresh"] = "record"
    """``record``: answer from the snapshot when it holds the resource, else fetch live and store it;
    ``replay``: never touch the network (no HTTP client is built), a miss is refused; ``refresh``: always
    fetch live (once per run or sweep) and add a new capture."""

    on_miss: Literal["refuse", "fail-run"] = "refuse"
    """Replay miss: ``refuse`` (one line to the model: not in the snapshot) or ``fail-run`` (the run stops
    as an infrastructure failure)."""

    manifest: Path | None = None
    """Serve exactly the captures this manifest pins (a sweep's ``shared/snapshot-manifest.jsonl`` or a
    run's ``snapshot.jsonl``), even when newer ones exist."""


class ModelConfig(_Model):
    """An OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp, Ollama, DeepSeek, OpenAI)."""

    base_url: str | None = None
    """Endpoint base URL, e.g. ``http://127.0.0.1:8000/v1``; defaults to ``OPENAI_BASE_URL``."""

    api_key: SecretStr | None = None
    """API key; defaults to ``OPENAI_API_KEY`` (a placeholder is sent to servers that need none)."""

    model: str | None = None
    """Model name as the endpoint knows it; defaults to ``OPENAI_MODEL``."""

    temperature: float = 1.0
    """Sampling temperature (the paper's 1.0)."""

    top_p: float = 0.95
    """Nucleus sampling (the paper's 0.95)."""

    max_tokens: int = 16384
    """Completion token cap per call (the paper's 16384)."""

    presence_penalty: float = 0.0
    """Presence penalty (the paper's 0.0)."""

    timeout_s: float = 600.0
    """Timeout of one HTTP attempt of a model call (the read timeout of a generation)."""

    max_retries: int = 6
    """Retries on 429, 5xx, connection errors and timeouts, with exponential backoff and jitter (the same
    500 body twice is a deterministic refusal and stops retrying; 4xx are never retried)."""

    timeout_retries: int = Field(default=1, ge=0)
    """Retries of a call whose attempt timed out (a runaway generation is not restarted again and again)."""

    call_time_cap_s: float | None = Field(default=1800.0, gt=0)
    """Wall-clock cap on ALL attempts and backoffs of one model call; past it the run stops with
    ``endpoint_unavailable``. None = no cap (``agent.time_budget_s`` still caps it)."""

    backoff_s: float = 1.0
    """First backoff delay; doubles per retry (capped at 60 s)."""

    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Extra fields merged into every request body (e.g. vLLM's ``chat_template_kwargs``)."""

    reasoning_passback: Literal["auto", "always", "never"] = "auto"
    """Reasoning text sent back on the assistant messages of the conversation: ``auto`` = when the server
    returned some, under the wire name it used (``reasoning_content`` for DeepSeek, Kimi, llama.cpp;
    ``reasoning`` for vLLM ≥ 0.16) — what DeepSeek and Kimi require on tool-call turns; ``always`` = on every
    assistant message, ``""`` when there was none (Kimi K2 thinking); ``never`` = not sent back."""

    parse_text_tool_calls: bool = False
    """Execute tool calls the server left as text in ``content`` or the reasoning (``<tool_call>{…}``,
    ``<function=…>``, a JSON object naming a tool). Off: they are only recorded (``text_tool_call``
    events); the paper uses native tool calls only."""

    context_window: int | None = Field(default=None, gt=0)
    """Tokens of the model's context window (prompt + reply). None = ask the server (vLLM ``/v1/models``
    ``max_model_len``, llama.cpp ``/props`` ``n_ctx`` per slot, Ollama ``num_ctx``), else unknown."""

    context_margin: int = Field(default=256, ge=0)
    """Tokens kept free beside the prompt estimate when ``max_tokens`` is fitted to the window (the
    estimate is the last ``usage.prompt_tokens`` plus a third of the new messages' characters)."""

    min_reply_tokens: int = Field(default=512, ge=1)
    """When the window leaves fewer tokens than this for the reply, the run stops with
    ``context_overflow`` (or asks for a final answer, see ``agent.on_context_overflow``)."""


class AgentConfig(_Model):
    """The ReAct loop and the profile it drives."""

    profile: str = "shell"
    """``shell``, ``fte``, ``snippet-only``, ``visit-snippet``, ``visit-summary``, ``open-find``, or an ablation
    arm of ``fte``: ``fte-no-grep``, ``fte-no-read``, ``fte-single-grep``."""

    max_turns: int = 300
    """Model calls before the run stops without an answer (the paper's 300)."""

    time_budget_s: float | None = None
    """Wall-clock budget for one question; None = unlimited."""

    max_consecutive_errors: int = 10
    """Stop after this many consecutive turns whose tool calls all failed or were malformed."""

    max_nudges: int = Field(default=5, ge=1)
    """Stop with ``too_many_nudges`` after this many replies in a row with neither a tool call nor an
    answer (each one is answered with a nudge)."""

    max_repeated_replies: int = Field(default=5, ge=2)
    """Stop with ``repeated_reply`` when this many replies in a row are identical (same text, reasoning and
    tool calls: a degenerate loop)."""

    on_context_overflow: Literal["stop", "final_answer"] = "stop"
    """When the conversation no longer fits the window: ``stop`` (stop reason ``context_overflow``; the
    paper applies no context management) or ``final_answer`` (one last call without tools asking for the
    answer; if that fails too, ``context_overflow``)."""

    first_tool_choice: str | None = None
    """Force a tool call on the FIRST turn only: a tool name, ``first`` (the profile's first tool), or
    ``required``. llama.cpp-family servers enforce only a named choice (llama-cpp-python refuses a string
    ``tool_choice``). None = the server's default (``auto``)."""

    current_date: str | None = None
    """Date (YYYY-MM-DD) written into the system prompt; None = today."""

    system_prompt_file: Path | None = None
    """Replace the built-in system prompt body with this file's text."""

    tool_descriptions_file: Path | None = None
    """TOML file overriding tool descriptions: ``[tool_name] description = "..."``."""

    grep_context: int = 3
    """Structured ``grep``: default context lines (the paper's prose says ±3; 0 = matching lines only)."""

    summary_model: ModelConfig | None = None
    """Model used by ``visit-summary`` to summarize pages; None = the agent's own endpoint. Its unset
    ``base_url``, ``api_key`` and ``model`` are taken from the agent's ``[model]``."""

    grep_max_matches: int = Field(default=20, ge=1)
    """Structured ``grep`` and open-find ``find``: matching lines shown per call (the paper's 20)."""

    grep_max_context: int = Field(default=10, ge=0)
    """Structured ``grep``: largest ``context`` a call may ask for (larger requests are capped)."""

    grep_timeout_s: float = Field(default=10.0, gt=0)
    """Structured ``grep`` and open-find ``find``: wall-clock limit for matching one pattern against the
    cache (a pattern that backtracks catastrophically becomes an error instead of a hang)."""

    grep_line_chars: int = Field(default=600, ge=80)
    """Structured ``grep``/``find``: a longer line is shown as an excerpt of this many characters around
    its first match (context lines: their beginning), so one huge paragraph cannot flood the output."""

    read_max_lines: int = Field(default=200, ge=1)
    """Structured ``read``: most lines per call (the paper's 200); also its default ``limit``."""

    read_max_bytes: int = Field(default=50_000, ge=1_000)
    """Structured ``read`` and ``grep``: most bytes (UTF-8) of one observation (the paper's ~50 KB)."""

    visit_snippet_chars: int = Field(default=3_000, ge=200)
    """``visit-snippet``: size of the page chunks ranked against the goal; the best one is returned."""

    visit_summary_page_chars: int = Field(default=60_000, ge=1_000)
    """``visit-summary``: the page text given to the summary model is cut to this many characters."""

    open_window_lines: int = Field(default=100, ge=1)
    """``open-find``: lines in the window shown by ``open``/``scroll``."""

    open_window_bytes: int = Field(default=20_000, ge=1_000)
    """``open-find``: most bytes (UTF-8) of one window; a window stops early at this size."""

    search_max_results: int = Field(default=50, ge=1)
    """Structured ``search`` (every non-shell profile): largest ``n`` a call may ask for (larger requests
    are capped; the shell helper accepts 1-50)."""


class RunConfig(_Model):
    """Everything one run needs; the root of the TOML file."""

    model: ModelConfig = Field(default_factory=ModelConfig)
    """The agent's model endpoint."""

    agent: AgentConfig = Field(default_factory=AgentConfig)
    """The loop and profile."""

    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """The container (shell profile) and the fetch policy (every profile)."""

    search: SearchConfig = Field(default_factory=SearchConfig)
    """The search backend."""

    snapshot: SnapshotConfig = Field(default_factory=SnapshotConfig)
    """Record/replay every page and search as WARC (off unless ``dir`` is set)."""


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"invalid configuration in {source}:"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        if e["type"] == "extra_forbidden":
            lines.append(f"  unknown key '{loc}'")
        else:
            lines.append(f"  {loc}: {e['msg']}")
    return "\n".join(lines)


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts merged: ``over`` wins, ``None`` values in ``over`` are skipped."""
    out = dict(base)
    for k, v in over.items():
        if v is None:
            continue
        if isinstance(v, dict):
            out[k] = deep_merge(out[k] if isinstance(out.get(k), dict) else {}, v)
        else:
            out[k] = v
    return out


ENV_VARS: dict[str, tuple[str, str]] = {
    "OPENAI_BASE_URL": ("model", "base_url"),
    "OPENAI_API_KEY": ("model", "api_key"),
    "OPENAI_MODEL": ("model", "model"),
    "SERPER_API_KEY": ("search", "serper_api_key"),
}
"""Environment variables read by :func:`load_config` (they override the TOML file; flags override them)."""


def env_overrides(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The nested settings given by the environment (:data:`ENV_VARS`; empty variables are ignored)."""
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for var, (table, key) in ENV_VARS.items():
        if env.get(var):
            out.setdefault(table, {})[key] = env[var]
    return out


def load_config(
    path: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> RunConfig:
    """Build a :class:`RunConfig`: defaults < the TOML file at ``path`` < the environment
    (:data:`ENV_VARS`, from ``environ`` or ``os.environ``) < ``overrides`` (nested dicts, e.g. from CLI
    flags; ``None`` values are ignored).

    Raises :class:`ConfigError` naming the offending key.
    """
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError as e:
            raise ConfigError(f"config file not found: {path}") from e
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path} is not valid TOML: {e}") from e
    data = deep_merge(data, env_overrides(environ))
    if overrides:
        data = deep_merge(data, overrides)
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_validation_error(e, source)) from e


# --- the reference: every option, its default and its docstring, as a commented TOML file ------------
def _toml_value(v: Any) -> str:
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str | Path):
        return json.dumps(str(v))
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML form for {v!r}")


def _table_lines(model: type[BaseModel], table: str) -> list[str]:
    doc = " ".join((model.__doc__ or "").split())
    lines = [f"[{table}]", f"# {doc}"]
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            nested.append((name, ann))
            continue
        lines.append("")
        for doc_line in (field.description or "").splitlines():
            lines.append(f"# {doc_line.strip()}".rstrip())
        default = field.get_default(call_default_factory=True)
        if default is None:
            lines.append(f"# {name} =  (unset by default)")
        elif isinstance(default, BaseModel):
            lines.append(f"# {name} =  (a table of the same keys as [model]; unset by default)")
        else:
            if hasattr(default, "get_secret_value"):
                default = default.get_secret_value()
            lines.append(f"{name} = {_toml_value(default)}")
    for name, sub in nested:
        lines += ["", *_table_lines(sub, f"{table}.{name}")]
    return lines


def reference_toml() -> str:
    """Every configuration option with its default and its docstring, as a commented TOML file that
    :func:`load_config` accepts unchanged (``fte-shell config``; also docs/config.md)."""
    out = [
        "# fte-shell configuration: every option with its default. Pass with --config FILE.",
        "# Precedence: defaults < this file < environment (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL,",
        "# SERPER_API_KEY) < command-line flags. Unknown keys are an error that names the key.",
    ]
    for name, field in RunConfig.model_fields.items():
        out += ["", *_table_lines(field.annotation, name)]  # type: ignore[arg-type]
    return "\n".join(out) + "\n"
