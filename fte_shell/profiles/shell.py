"""The shell profile: one tool, ``bash(command)``, run in the question's sandbox.

The container is started when the profile is made (so a missing Docker daemon stops the run before the
first model call) and removed by :meth:`ShellProfile.close`. ``search``, ``fetch`` and ``list_fetched``
are helper commands inside the container that reach the host gateway; the workspace the agent fills is
``ctx.workspace_dir`` (mounted read-only at /work). A box started ahead (``ctx.sandbox_source``: a pool's)
mounts a directory of its own: the run's workspace is a link to it while the box lives and a copy of it
once the profile closes, so the run directory is complete either way.

The observation is :meth:`fte_shell.sandbox.Observation.render`: the capped output, then the exit status
and any timeout, restart or truncation note. A non-zero exit status is a normal observation
(``error=False``); ``meta`` carries ``exit_code``, ``timed_out``, ``truncated``, ``restarted``,
``duration_s``, ``cwd`` (the working directory after the command), and the ``fetches`` and ``searches``
the command made through the gateway (its per-command log, drained after each command).
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ToolError
from ..prompts import read_prompt
from ..record.events import FetchFact, SearchFact
from .base import QuestionContext, Tool, ToolProfile, ToolResult
from .schema import ToolArgs

if TYPE_CHECKING:
    from ..sandbox import Sandbox
    from ..sandbox.gateway import GatewayEvent


def gateway_facts(events: list[GatewayEvent], backend: str | None) -> dict[str, list[dict[str, Any]]]:
    """``{"fetches": […], "searches": […]}`` (:class:`~fte_shell.record.events.FetchFact`,
    :class:`~fte_shell.record.events.SearchFact`) of the requests the gateway served for one command."""
    fetches: list[dict[str, Any]] = []
    searches: list[dict[str, Any]] = []
    for e in events:
        if e.op == "fetch":
            if not e.results and e.error:  # the request as a whole was refused
                fetches += [FetchFact(url=str(u), ok=False, error=e.error).model_dump() for u in e.args.get("urls") or []]
            for r in e.results:
                fetches.append(FetchFact(url=str(r.get("ref", "")), ok=bool(r.get("ok")), path=r.get("path"),
                                         source=r.get("source"), chars=r.get("chars"), new=r.get("new"),
                                         retrieved_at=r.get("retrieved_at"), error=r.get("error")).model_dump())
        elif e.op == "search" and "query" in e.args:
            searches.append(SearchFact(query=str(e.args["query"]), n=e.args.get("n"), backend=backend,
                                       urls=[str(r["url"]) for r in e.results if "url" in r],
                                       cache_hit=e.cache_hit, error=None if e.ok else e.error).model_dump())
    return {"fetches": fetches, "searches": searches}


def exported(listing: str) -> dict[str, str]:
    """``{name: value}`` of ``export -p``'s ``declare -x NAME="VALUE"`` lines (a name without a value maps
    to ``""``; other lines, e.g. an ``xtrace`` the agent switched on, are skipped)."""
    out: dict[str, str] = {}
    for line in listing.splitlines():
        if not line.startswith("declare -x "):
            continue
        name, eq, value = line[len("declare -x "):].partition("=")
        out[name] = value[1:-1] if eq and value.startswith('"') and value.endswith('"') else value
    return out


CORPUS_ADDENDUM = "corpus_in_box.md"
"""What the model is told when ``[sandbox] corpus`` puts the corpus in the box at /corpus."""

SCRATCH_DIR = "/tmp"
"""Where the model writes files of its own in the box (a private tmpfs: ``sandbox/hardening.py``)."""


class BashArgs(ToolArgs):
    """Arguments of ``bash``."""

    command: str
    """The command line to run."""


class ShellProfile(ToolProfile):
    """``bash`` in a hardened container whose gateway serves ``fetch`` and ``search``."""

    name = "shell"
    uses_box = True

    def __init__(self, ctx: QuestionContext, sandbox: Sandbox | None = None):
        """Open the question's sandbox (or use ``sandbox``, which then stays the caller's to close)."""
        super().__init__(ctx)
        self._owns_sandbox = sandbox is None
        self._served = 0
        """The gateway's ``served`` count when this profile last drained its log."""
        self.sandbox: Sandbox | None = sandbox if sandbox is not None else self._open_sandbox()

    def _open_sandbox(self) -> Sandbox:
        from ..sandbox import Sandbox

        ctx = self.ctx
        if ctx.sandbox_source is not None:  # a box started ahead: its /work is its own directory
            sb = ctx.sandbox_source(world=ctx.world, run_id=ctx.run_id)
            try:
                link_workspace(ctx.workspace_dir, sb.workspace)
            except BaseException:
                sb.close()
                raise
            return sb
        cfg = ctx.config.sandbox.model_copy(update={"workspace_dir": ctx.workspace_dir})
        return Sandbox(cfg, world=ctx.world, run_id=ctx.run_id or None)

    def _make_tools(self) -> list[Tool]:
        return [Tool("bash", BashArgs, self.bash)]

    def system_addendum(self) -> str:
        text = super().system_addendum()
        if self.ctx.world.search is None:
            text += (
                "\n\nNo search backend is configured for this run: the `search` command will tell you so. "
                "Work from URLs or document ids you already know."
            )
        if self.ctx.config.sandbox.corpus is not None:  # the corpus in the box (sandbox/corpus_files.py)
            text += "\n\n" + read_prompt(CORPUS_ADDENDUM)
        return text

    def bash(self, args: BashArgs) -> ToolResult:
        if self.sandbox is None:
            raise ToolError("the sandbox is closed")
        if not args.command.strip():
            raise ToolError("bash needs a non-empty command")
        gateway = self.sandbox.gateway
        if gateway is not None and gateway.served != self._served:
            gateway.drain_events()  # what earlier (background) commands left is not this command's
        before = self._served = gateway.served if gateway is not None else 0
        obs = self.sandbox.run(args.command)
        snap = self.ctx.world.snapshot
        if snap is not None and snap.failure is not None:  # a snapshot replay miss with on_miss = fail-run
            raise snap.failure
        meta = {
            "exit_code": obs.exit_code,
            "timed_out": obs.timed_out,
            "truncated": obs.truncated,
            "restarted": obs.restarted,
            "duration_s": obs.duration_s,
            "cwd": obs.cwd,
        }
        if gateway is not None and gateway.served != before:  # the command used fetch/search/list_fetched
            meta.update(gateway_facts(gateway.drain_events(), self.ctx.world.search.name if self.ctx.world.search else None))
            self._served = gateway.served
        elif gateway is not None:
            meta.update(fetches=[], searches=[])
        return ToolResult(output=obs.render(), meta=meta)

    def shell_state(self) -> dict[str, Any]:
        """The session's working directory and exported environment (``{"cwd", "env": {name: value}}``),
        read by a probe of builtins that is not a tool call (nothing is recorded; every command starts with
        the same ``$?`` and ``$_``, so the agent's next command cannot tell). A fork reads it after its
        replayed turns (:mod:`fte_shell.episode.fork`)."""
        if self.sandbox is None:
            raise ToolError("the sandbox is closed")
        obs = self.sandbox.run("\\builtin export -p")
        return {"cwd": obs.cwd, "env": exported(obs.output)}

    def scratch_files(self) -> list[str]:
        """The files under /tmp in the box (the model's own notes and downloads; /tmp is the box's private
        scratch space, empty when it starts), as ``path (N bytes)``, oldest first; [] when the box cannot
        be asked (:class:`~fte_shell.profiles.base.ScratchFiles`)."""
        if self.sandbox is None:
            return []
        try:
            code, out = self.sandbox.box.exec(["find", SCRATCH_DIR, "-xdev", "-type", "f", "-printf", "%T@\t%s\t%p\n"])
        except Exception:  # noqa: BLE001 - a listing for the model, not worth failing the run over
            return []
        rows = sorted(line.split("\t", 2) for line in out.splitlines() if line.count("\t") == 2)
        return [f"{path} ({int(size):,} bytes)" for _, size, path in rows if size.isdigit()] if code == 0 else []

    def close(self) -> None:
        """Close the box (a box of ``ctx.sandbox_source``: copy its /work into the run's workspace first,
        then give it to ``ctx.sandbox_release`` when there is one and the copy succeeded: the release
        empties the box, so the run's workspace must not point into it any more)."""
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None and self._owns_sandbox:
            kept = False
            try:
                if self.ctx.sandbox_source is not None:
                    keep_workspace(self.ctx.workspace_dir, sandbox.workspace)
                    kept = True
            finally:
                if kept and self.ctx.sandbox_release is not None:
                    self.ctx.sandbox_release(sandbox)
                else:
                    sandbox.close()


def link_workspace(run_ws: Path, box_ws: Path) -> None:
    """Make the run's workspace (``RUN_DIR/workspace``, still empty) a link to ``box_ws``, the directory a
    box started ahead mounts at /work: ``report``, ``view`` and the episode's readers see its pages as
    they arrive. A run workspace that is not empty stays (:func:`keep_workspace` copies into it)."""
    from ..sandbox.ownership import note_link

    with contextlib.suppress(FileNotFoundError, OSError):
        run_ws.rmdir()  # fails when not empty
    if not run_ws.exists():
        run_ws.symlink_to(box_ws.resolve(), target_is_directory=True)
        note_link(box_ws, run_ws.absolute())  # a gc after this process died copies it, not leaves it dangling


def keep_workspace(run_ws: Path, box_ws: Path) -> None:
    """Before the box (and its directory) goes: turn the link :func:`link_workspace` made into a copy of
    ``box_ws``, so the run directory keeps its workspace like any other run's."""
    if not run_ws.is_symlink():
        shutil.copytree(box_ws, run_ws, symlinks=True, dirs_exist_ok=True)
        return
    tmp = run_ws.with_name(".workspace-copy")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(box_ws, tmp, symlinks=True)
    run_ws.unlink()
    tmp.rename(run_ws)
