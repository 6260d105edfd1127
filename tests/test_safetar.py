"""fte_shell.safetar: tar extraction with tarfile's PEP 706 filters where this Python has them (3.11.4+)
and the same rules applied by hand where it does not (Debian 12's 3.11.2). Every case runs the fallback
(``native=False``) and, where this Python has filters, tarfile's own, against hostile archives and a good
one; one test runs the fallback on the sandbox image's Python (Debian 12's 3.11.2)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from fte_shell.safetar import NATIVE, Kind, UnsafeArchive, extract, extract_all

ROUTES = [pytest.param(False, id="fallback")] + ([pytest.param(True, id="native")] if NATIVE else [])
KINDS: tuple[Kind, ...] = ("data", "tar")


def _member(name: str, kind: bytes = tarfile.REGTYPE, *, mode: int = 0o644, link: str = "",
            uid: int = 0) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname, info.uid, info.mtime = kind, mode, link, uid, 1_700_000_000
    return info, (f"{name}\n".encode() if kind == tarfile.REGTYPE else b"")


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for info, data in members:
            info.size = len(data)
            t.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


def _extract_all(data: bytes, dest: Path, kind: Kind, native: bool) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        extract_all(tar, dest, kind=kind, native=native)


def _tree(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every path under root: (type, mode bits, link target or content)."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        if p.is_symlink():
            out[str(p.relative_to(root))] = ("link", 0, os.readlink(p))
        elif p.is_dir():
            out[str(p.relative_to(root))] = ("dir", st.st_mode & 0o7777, "")
        else:
            out[str(p.relative_to(root))] = ("file", st.st_mode & 0o7777, p.read_text())
    return out


GOOD = _tar(
    _member("d", tarfile.DIRTYPE, mode=0o755),
    _member("d/run.sh", mode=0o4775),  # set-uid and group write: dropped
    _member("d/notes.txt", mode=0o444),  # data: made writable by its owner
    _member("d/rel", tarfile.SYMTYPE, link="notes.txt"),
    _member("d/hard", tarfile.LNKTYPE, mode=0o444, link="d/notes.txt"),
    _member("ro", tarfile.DIRTYPE, mode=0o555),
    _member("ro/inside.txt", mode=0o644, uid=1234),
)


@pytest.mark.parametrize("native", ROUTES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_good_archive_is_extracted_with_the_modes_of_its_kind(tmp_path: Path, kind: Kind, native: bool) -> None:
    _extract_all(GOOD, tmp_path / "out", kind, native)
    tree = _tree(tmp_path / "out")
    assert tree["d/run.sh"] == ("file", 0o755, "d/run.sh\n")
    assert tree["d/rel"] == ("link", 0, "notes.txt") and tree["d/hard"][2] == "d/notes.txt\n"
    assert tree["d/notes.txt"][1] == (0o644 if kind == "data" else 0o444)
    assert tree["ro"][1] == (0o555 if kind == "tar" else tree["d"][1])  # data: directories get the default mode
    assert (tmp_path / "out" / "d" / "hard").stat().st_ino == (tmp_path / "out" / "d" / "notes.txt").stat().st_ino
    if os.geteuid() == 0:  # owners: kept by the "tar" rules, never set by the "data" ones
        assert (tmp_path / "out" / "ro" / "inside.txt").stat().st_uid == (1234 if kind == "tar" else 0)


@pytest.mark.skipif(not NATIVE, reason="this Python's tarfile has no filters to compare with")
@pytest.mark.parametrize("kind", KINDS)
def test_the_fallback_extracts_what_tarfiles_own_filter_extracts(tmp_path: Path, kind: Kind) -> None:
    _extract_all(GOOD, tmp_path / "native", kind, True)
    _extract_all(GOOD, tmp_path / "fallback", kind, False)
    assert _tree(tmp_path / "fallback") == _tree(tmp_path / "native")


def test_one_member_at_a_time_for_a_root_file_system(tmp_path: Path) -> None:
    """The bwrap tree's way: a stream, one member at a time, attributes for files only; absolute symlinks
    are the tree's own (resolved in the box), kept as links."""
    data = _tar(_member("etc", tarfile.DIRTYPE), _member("etc/localtime", tarfile.SYMTYPE, link="/usr/share/zoneinfo/UTC"),
                _member("bin/tool", mode=0o2755))
    for native in [False] + ([True] if NATIVE else []):
        dest = tmp_path / str(native)
        dest.mkdir()
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as tar:
            for m in tar:
                extract(tar, m, dest, kind="tar", set_attrs=m.isreg(), numeric_owner=True, native=native)
        assert os.readlink(dest / "etc/localtime") == "/usr/share/zoneinfo/UTC"
        assert (dest / "bin/tool").stat().st_mode & 0o7777 == 0o755


HOSTILE = {
    "dotdot": [_member("../escaped.txt")],
    "dotdot-deep": [_member("d", tarfile.DIRTYPE), _member("d/../../escaped.txt")],
    "hardlink-out": [_member("hl", tarfile.LNKTYPE, link="../outside/secret.txt")],
    "hardlink-absolute": [_member("hl", tarfile.LNKTYPE, link="OUTSIDE/secret.txt")],
    "through-a-symlink": [_member("lnk", tarfile.SYMTYPE, link="OUTSIDE"), _member("lnk/planted.txt")],
    "over-a-symlink": [_member("lnk", tarfile.SYMTYPE, link="OUTSIDE/secret.txt"), _member("lnk")],
    "char-device": [_member("dev/null", tarfile.CHRTYPE, mode=0o666)],
    "block-device": [_member("dev/sda", tarfile.BLKTYPE, mode=0o660)],
    "fifo": [_member("pipe", tarfile.FIFOTYPE)],
}
"""Archives no kind extracts (``OUTSIDE``: a directory beside the destination, by absolute path)."""

LINKS_OUT = {
    "symlink-relative-out": [_member("evil", tarfile.SYMTYPE, link="../outside")],
    "symlink-absolute": [_member("evil", tarfile.SYMTYPE, link="/etc")],
}
"""Symlinks out: refused as data; a root file system's own absolute links (kept by the "tar" rules)."""


def _outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir(exist_ok=True)
    (out / "secret.txt").write_text("secret\n")
    return out


def _hostile(members: list[tuple[tarfile.TarInfo, bytes]], outside: Path) -> bytes:
    for info, _ in members:
        info.linkname = info.linkname.replace("OUTSIDE", str(outside))
    return _tar(*members)


@pytest.mark.parametrize("native", ROUTES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", sorted(HOSTILE) + sorted(LINKS_OUT))
def test_a_hostile_archive_writes_nothing_outside(tmp_path: Path, case: str, kind: Kind, native: bool) -> None:
    outside = _outside(tmp_path)
    data = _hostile(HOSTILE.get(case) or LINKS_OUT[case], outside)
    refused = case in HOSTILE or kind == "data"
    dest = tmp_path / "dest"
    if refused:
        with pytest.raises(UnsafeArchive, match="tar member refused"):
            _extract_all(data, dest, kind, native)
    else:
        _extract_all(data, dest, kind, native)
        assert (dest / "evil").is_symlink()  # a link, nothing written through it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest", "outside"]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret\n" and (outside / "secret.txt").stat().st_nlink == 1


@pytest.mark.parametrize("native", ROUTES)
@pytest.mark.parametrize("kind", KINDS)
def test_an_absolute_member_lands_inside(tmp_path: Path, kind: Kind, native: bool) -> None:
    target = tmp_path / "outside" / "abs.txt"
    _extract_all(_tar(_member(str(target))), tmp_path / "dest", kind, native)
    assert not target.exists()
    assert (tmp_path / "dest" / str(target).lstrip("/")).read_text() == f"{target}\n"


def test_an_unsafe_archive_is_a_tar_error() -> None:
    """Callers that catch tarfile.TarError (a refused member on Pythons with filters) keep working."""
    assert issubclass(UnsafeArchive, tarfile.TarError)


@pytest.mark.docker
def test_the_fallback_on_debian_12s_python(tmp_path: Path, docker_ready: None) -> None:
    """The sandbox image is Debian 12's: its python3 is 3.11.2, whose tarfile has no filters."""
    from fte_shell.config import SandboxConfig

    pkg = tmp_path / "src" / "fte_shell"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for name in ("errors.py", "safetar.py"):
        shutil.copy(Path(__file__).parent.parent / "fte_shell" / name, pkg / name)
    (tmp_path / "src" / "good.tar").write_bytes(GOOD)
    (tmp_path / "src" / "bad.tar").write_bytes(_tar(_member("../escaped.txt")))
    script = (
        "import sys, tarfile, tempfile; sys.path.insert(0, '/src')\n"
        "from fte_shell.safetar import NATIVE, UnsafeArchive, extract_all\n"
        "print(sys.version.split()[0], NATIVE)\n"
        "d = tempfile.mkdtemp()\n"
        "with tarfile.open('/src/good.tar') as t: extract_all(t, d + '/good', kind='data')\n"
        "print(open(d + '/good/d/run.sh').read().strip())\n"
        "try:\n"
        "    with tarfile.open('/src/bad.tar') as t: extract_all(t, d + '/bad/x', kind='data')\n"
        "except UnsafeArchive as e: print('refused:', e)\n"
    )
    os.chmod(tmp_path, 0o755)
    for p in tmp_path.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    r = subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{tmp_path / 'src'}:/src:ro",
                        SandboxConfig().image, "python3", "-c", script], capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stderr
    python, content, refused = r.stdout.splitlines()
    assert python == "3.11.2 False"  # the Python that has no filter=: the fallback ran
    assert content == "d/run.sh" and refused.startswith("refused: tar member refused: '../escaped.txt'")
