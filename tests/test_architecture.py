"""The shape of the house, checked: the import-linter contracts of pyproject.toml (layers, independent
providers and benchmark plugins), no import cycle between modules (imports inside functions included),
no module over 400 lines, and one owner for each file of the run and sweep directories."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import grimp
import pytest

from fte_shell.config import RunConfig
from tests.providers import ProviderCase

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "fte_shell"
MAX_LINES = 400


def test_import_contracts_hold() -> None:
    """``lint-imports`` with the contracts in pyproject.toml (the layers of docs/ARCHITECTURE.md)."""
    # this interpreter's import-linter (a venv over a base interpreter that holds it has no script of its own,
    # and another interpreter's script would find another copy of fte_shell)
    cli = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    proc = subprocess.run([sys.executable, "-c", cli, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout, proc.stdout[-3000:]


def test_every_top_level_module_is_in_a_layer() -> None:
    """The layers contract is exhaustive: a new top-level module or package must be given its layer."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = cfg["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    placed = {m.strip().removeprefix("fte_shell.") for layer in layers for m in layer.replace(":", "|").split("|")}
    present = {p.stem for p in PKG.glob("*.py") if p.stem not in ("__init__", "__main__")}
    present |= {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert present - placed == set(), f"modules in no layer of pyproject.toml: {sorted(present - placed)}"
    assert placed - present == set(), f"layers naming no module: {sorted(placed - present)}"


def test_nothing_imports_the_root_package() -> None:
    """``fte_shell/__init__.py`` is a thin facade for users; no module of the package imports it."""
    graph = grimp.build_graph("fte_shell", cache_dir=None)
    assert graph.find_modules_that_directly_import("fte_shell") == set()


def _sccs(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components (size > 1, or a self-import) of the module import graph (Tarjan)."""
    mods = sorted(m for m in graph.modules if m.startswith("fte_shell"))
    succ = {m: sorted(x for x in graph.find_modules_directly_imported_by(m) if x.startswith("fte_shell"))
            for m in mods}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in mods:
        if m not in index:
            visit(m)
    return out


def test_no_import_cycles() -> None:
    """No two modules import each other, directly or through others — imports inside functions and
    under ``TYPE_CHECKING`` count (a package's ``__init__`` importing its own submodules is the only
    edge allowed back to a package)."""
    graph = grimp.build_graph("fte_shell", cache_dir=None)
    cycles = _sccs(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_module_over_400_lines() -> None:
    big = {str(p.relative_to(ROOT)): n for p in PKG.rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


OWNED = {
    "result.json": "fte_shell/record/",
    "trajectory.jsonl": "fte_shell/record/",
    "questions.jsonl": "fte_shell/record/",
    "failures.jsonl": "fte_shell/record/",
    "sweep.json": "fte_shell/record/",
    "judgement.json": "fte_shell/record/",
}


def _string_constants(path: Path) -> set[str]:
    """String constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs}


def test_run_and_sweep_files_have_one_owner() -> None:
    """The names of the run and sweep directory's files are spelled in code only in fte_shell/record/
    (messages and docstrings may name them; no other module builds their paths)."""
    bad = []
    for p in PKG.rglob("*.py"):
        rel = str(p.relative_to(ROOT))
        consts = _string_constants(p)
        for name, owner in OWNED.items():
            if not rel.startswith(owner) and name in consts:
                bad.append(f"{rel}: {name}")
    assert not bad, "file names used outside their owner:\n" + "\n".join(sorted(bad))


def test_openai_client_only_in_the_model_package() -> None:
    bad = [str(p.relative_to(ROOT)) for p in PKG.rglob("*.py")
           if "OpenAI(" in p.read_text(encoding="utf-8") and not str(p.relative_to(PKG)).startswith("model/")]
    assert not bad, f"openai clients built outside fte_shell/model/: {bad}"


DATASET_KINDS = {"hotpotqa", "browsecomp", "browsecomp-plus", "widesearch", "jsonl", "gaia", "xbench", "browsecomp-zh",
                 "hle", "simpleqa", "frames", "webwalkerqa"}


def test_no_dataset_kind_branch_outside_the_benchmarks_package() -> None:
    """Only fte_shell/benchmarks/ names a dataset kind in code (the registry finds the plugin)."""
    bad = []
    for p in PKG.rglob("*.py"):
        rel = str(p.relative_to(PKG))
        if rel.startswith("benchmarks/") or rel in ("cli/corpus.py", "export/base.py", "export/browsecomp_plus.py"):
            # command names: `fte-shell corpus hotpotqa`, the exporter `browsecomp-plus` (its registry entry, its name)
            continue
        bad += [f"{rel}: {k}" for k in sorted(_string_constants(p) & DATASET_KINDS)]
    assert not bad, "dataset kinds named outside fte_shell/benchmarks/:\n" + "\n".join(bad)


MAX_FILES_PER_COMMAND = 7
"""The bound for every provider: a provider builds the box and the shell's stream (a runtime type of
sandbox/output.py) when the shell starts, so a command crosses only the runtime (facade, session, output),
whichever provider started the box."""


@pytest.mark.docker
def test_one_bash_command_crosses_at_most_seven_files(provider_case: ProviderCase) -> None:
    """Follow one bash tool call for real, from the episode's dispatch (``Episode.call_raw``: what the
    loop, a script or any other driver calls) to its result: the fte_shell files whose code runs on the
    way (the trajectory writer included), with a box of each provider case."""
    from fte_shell.episode import Episode
    from fte_shell.profiles import QuestionContext, make_profile
    from fte_shell.record.rundir import RunWriter
    from fte_shell.world import RunWorld

    cfg = RunConfig(sandbox=provider_case.config())
    tmp = Path(tempfile.mkdtemp(prefix="arch-trace-"))
    os.chmod(tmp, 0o755)  # a bwrap box started by root runs as sandbox.user, who must reach the workspace
    try:
        with RunWriter(tmp / "run") as rec:
            profile = make_profile("shell", QuestionContext(cfg, rec.workspace_dir, RunWorld(), "arch-trace"))
            try:
                ep = Episode(cfg, "q", profile, rec)
                call = {"id": "c1", "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "echo hi"}'}}
                ep.call_raw(call, turn=1)  # warm: the first command may start the shell
                files: set[str] = set()

                def profiler(frame: object, event: str, arg: object) -> None:
                    if event == "call":
                        name = frame.f_code.co_filename  # type: ignore[attr-defined]
                        if name.startswith(str(PKG)):
                            files.add(str(Path(name).relative_to(ROOT)))

                sys.setprofile(profiler)
                try:
                    _, res = ep.call_raw(call, turn=1)
                finally:
                    sys.setprofile(None)
            finally:
                profile.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert not res.error and res.output.startswith("hi")
    assert len(files) <= MAX_FILES_PER_COMMAND, f"{provider_case.id}: {len(files)} files: {sorted(files)}"
    assert not [f for f in files if "/providers/" in f], f"provider code ran for a command: {sorted(files)}"
    print(f"{provider_case.id}: one bash command crosses {len(files)} files: {sorted(files)}")
