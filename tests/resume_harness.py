"""The kill harness of tests/test_resume.py: a real ``fte-shell run --out DIR`` in its own process, SIGKILLed
at chosen points and started again until it finishes.

* the model is an emulator (tests/emulators.py) whose brain answers the scripted turn of the number of
  requests it ANSWERED so far: a request that arrives at a kill point kills the harness (SIGKILL) and is
  never answered, so every answered request is one the model was paid for;
* the pages are a loopback server; a ``/kill/N`` page kills the harness the first time it is asked for (a
  kill between a reply and its tool result: the reply is on disk, the result is not), and serves a page
  afterwards; every completed page response is counted;
* search is a loopback Serper.

Kill points: ``("request", n)`` (the n-th answered request: after turn n-1's results, before turn n's
reply) and ``("page", N)``.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulators import Emulator, Personality
from test_fork import BREAKWATER, CLEAN_ENV, HARBOUR, Q  # the pages and question of the fork tests

from fte_shell.standins.server import ScriptToolCall, ScriptTurn
from tests.servers import FakeSerper, LoopbackServer

ROOT = Path(__file__).resolve().parent.parent
KILL_PAGE = """<html><head><title>Note {n}</title></head><body><main><p>Harbour note number {n}: the quay
was extended in {year}.</p></main></body></html>"""


def bash(turn: int, command: str) -> ScriptTurn:
    return ScriptTurn(tool_calls=[ScriptToolCall(id=f"c{turn}", name="bash", arguments={"command": command})])


def shell_script(base: str, kill_pages: list[int]) -> list[ScriptTurn]:
    """A research run of the shell profile: fetches, a search, files written to /work and /tmp, cwd and
    environment changes, a nudge, and a fetch of each ``/kill/N`` page."""
    steps = [
        f"fetch {base}/tern-quay",
        "grep -c dredged /work/*.txt; echo 'first note' > /work/notes.md",
        "search 'Tern Quay breakwater'",
        "cd /tmp && mkdir -p scratch && cd scratch && export RESUME_X=one && echo kept > a.txt",
        f"fetch {base}/breakwater",
        "pwd; cat a.txt; echo \"$RESUME_X\"",
        "echo 'second note' >> /work/notes.md; wc -l /work/notes.md",
        None,  # no tool call: a nudge
        "grep -h 'rebuilt' /work/*.txt | head -3",
        "ls /work | sort",
        "sed -n 1,2p /work/notes.md",
        "echo \"$RESUME_X\" > /work/env.txt; cd /work",
        "grep -l Brand /work/*.txt | wc -l",
        "tail -1 /work/notes.md",
    ]
    for i, n in enumerate(kill_pages):  # a kill page fetched every other turn from turn 3 on
        steps.insert(2 + 2 * i, f"echo 'before {n}' >> /work/notes.md; fetch {base}/kill/{n}")
    turns: list[ScriptTurn] = []
    for cmd in steps:
        t = len(turns) + 1
        turns.append(ScriptTurn(content="Let me think about what I have.") if cmd is None else bash(t, cmd))
    turns.append(ScriptTurn(content="<answer>Lio Brand</answer>"))
    return turns


@dataclass
class Killer:
    """Kills the harness process at its points, each once."""

    points: set[tuple[str, int]]
    fired: list[tuple[str, int]] = field(default_factory=list)
    pid: int | None = None

    def fire(self, point: tuple[str, int]) -> bool:
        if point not in self.points or point in self.fired or self.pid is None:
            return False
        self.fired.append(point)
        os.kill(self.pid, signal.SIGKILL)
        return True


class Brain:
    """Answers the scripted turn of the number of requests answered so far (a killed request is not)."""

    def __init__(self, script: list[ScriptTurn], killer: Killer | None):
        self.script, self.killer = script, killer
        self.answered: list[dict[str, Any]] = []
        self.killed: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> ScriptTurn:
        n = len(self.answered) + 1
        if self.killer is not None and self.killer.fire(("request", n)):
            self.killed.append(body)
            time.sleep(0.5)  # the client is dead; it gets no answer
            raise RuntimeError("killed")
        self.answered.append(body)
        return self.script[min(n, len(self.script)) - 1]


class Web:
    """The loopback pages (with kill pages) and Serper of one test."""

    def __init__(self, kill_pages: list[int], killer: Killer | None):
        self.pages = LoopbackServer().start()
        self.pages.route("/tern-quay", body=HARBOUR)
        self.pages.route("/breakwater", body=BREAKWATER)
        for n in kill_pages:
            self.pages.route(f"/kill/{n}", body=self._killing(n, killer))
        self.serper = FakeSerper([{"title": "Tern Quay harbour", "link": self.pages.url("/tern-quay"),
                                   "snippet": "dredged", "position": 1}])

    @staticmethod
    def _killing(n: int, killer: Killer | None) -> Any:
        def body() -> Iterator[bytes]:
            if killer is not None and killer.fire(("page", n)):
                time.sleep(0.5)
                return
            yield KILL_PAGE.format(n=n, year=1900 + n).encode()
        return body

    def served(self) -> dict[str, int]:
        """Page responses served (a body sent, whole) by path; a kill page's killing answer sends none."""
        out: dict[str, int] = {}
        for r in self.pages.requests:
            if r.completed and r.bytes_sent and r.method == "GET" and r.path != "/robots.txt":
                out[r.path] = out.get(r.path, 0) + 1
        return out

    def close(self) -> None:
        self.pages.stop()
        self.serper.close()


def write_config(path: Path, model_url: str, web: Web, provider: str, snap: Path,
                 context: dict[str, Any] | None = None) -> Path:
    lines = [
        "[model]", f'base_url = "{model_url}"', 'model = "emu-model"', "max_retries = 0", "backoff_s = 0.01",
        "[agent]", 'profile = "shell"', "max_turns = 40", 'current_date = "2026-01-15"',
        "[search]", 'backend = "serper"', f'serper_url = "{web.serper.url}"', "num_results = 2",
        'serper_api_key = "k"',
        "[sandbox]", f'provider = "{provider}"',
        "[sandbox.fetch_policy]", f'allow_private = ["{web.pages.host_port}"]',
        "[snapshot]", f'dir = "{snap}"',
    ]
    if context:
        lines += ["[agent.context]", *(f"{k} = {json.dumps(v)}" for k, v in context.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_until_done(cfg: Path, out: Path, killer: Killer | None, limit: int = 60) -> list[int]:
    """Start ``fte-shell run Q --out OUT`` until it exits 0; returns every exit status (-9: killed)."""
    env = {**os.environ, **CLEAN_ENV, "PYTHONPATH": str(ROOT)}
    codes: list[int] = []
    for _ in range(limit):
        proc = subprocess.Popen([sys.executable, "-m", "fte_shell", "run", Q, "--out", str(out), "--config",
                                 str(cfg), "--quiet"], env=env, cwd=str(out.parent),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if killer is not None:
            killer.pid = proc.pid
        try:
            _stdout, stderr = proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        codes.append(proc.returncode)
        if proc.returncode == 0:
            return codes
        assert proc.returncode == -signal.SIGKILL, (proc.returncode, stderr.decode()[-3000:])
    raise AssertionError(f"the run did not finish after {limit} starts: {codes}")


def tree(d: Path) -> dict[str, str]:
    """sha256 of every file under ``d``."""
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


def gc_boxes() -> None:
    """Remove the boxes the killed harnesses left (their owner process is gone)."""
    subprocess.run([sys.executable, "-m", "fte_shell", "sandbox", "gc"], env={**os.environ, "PYTHONPATH": str(ROOT)},
                   capture_output=True, timeout=300, check=False)


def start_emulator(script: list[ScriptTurn], killer: Killer | None) -> tuple[Emulator, Brain]:
    brain = Brain(script, killer)
    return Emulator(Personality(), brain).__enter__(), brain
