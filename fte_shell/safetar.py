"""Extracting tar archives safely on every Python fte-shell supports (the one place that does).

tarfile's extraction filters (PEP 706, ``filter="data"`` / ``filter="tar"``) exist from Python 3.11.4;
Debian 12 ships 3.11.2. :func:`extract` and :func:`extract_all` use tarfile's filter where it exists and
otherwise apply the same rules themselves (``native=False`` forces that, for tests):

- both kinds: a leading ``/`` is stripped from member names; a member that would land outside the
  destination (``..``, or through a symlink extracted earlier) is refused; set-uid/set-gid/sticky and
  group/other write bits are dropped from the modes set; a hard link must point inside the destination;
  device files and FIFOs are refused (a caller that expects them, like the bwrap root file system,
  leaves them out first);
- ``"data"`` (an archive of plain data: a run directory): symlinks must point inside the destination
  too, owners are not set, a file is made readable and writable by its owner, directories get the
  default mode;
- ``"tar"`` (a Unix tree: a root file system): symlinks may point anywhere (they are resolved inside the
  box's own root), owners are set for root (``numeric_owner``), modes are kept (less the bits above).

A refused member raises :class:`UnsafeArchive` (a :class:`tarfile.TarError`).
"""

from __future__ import annotations

import copy
import functools
import os
import tarfile
from pathlib import Path
from typing import Literal

from .errors import FteError

Kind = Literal["data", "tar"]

NATIVE = hasattr(tarfile, "data_filter")
"""Whether this Python's tarfile has the extraction filters (3.11.4 and later)."""


class UnsafeArchive(FteError, tarfile.TarError):
    """A tar member that would be written outside the destination, link out of it, or is a device."""


def extract(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: str | os.PathLike[str], *, kind: Kind,
            set_attrs: bool = True, numeric_owner: bool = False, native: bool = NATIVE) -> None:
    """Extract one ``member`` of ``tar`` under ``dest`` by the rules of ``kind`` (see the module)."""
    if native:
        tar.extract(member, dest, set_attrs=set_attrs, numeric_owner=numeric_owner,
                    filter=functools.partial(_native_filter, kind))  # type: ignore[call-arg]
        return
    root = os.path.realpath(dest)
    safe = _filtered(member, root, kind)
    target = os.path.join(root, safe.name)
    if safe.isdir():
        os.makedirs(target, exist_ok=True)  # default mode, like tarfile for a mode-less directory
    else:
        tar.extract(safe, root, set_attrs=False, **_TRUSTED)  # type: ignore[arg-type]
    if set_attrs:
        _set_attrs(safe, target, kind, numeric_owner)


def extract_all(tar: tarfile.TarFile, dest: str | os.PathLike[str], *, kind: Kind, native: bool = NATIVE) -> None:
    """Extract every member of ``tar`` under ``dest`` (created) by the rules of ``kind``; directories
    get their attributes once their files are in."""
    Path(dest).mkdir(parents=True, exist_ok=True)
    if native:
        tar.extractall(dest, filter=functools.partial(_native_filter, kind))  # type: ignore[call-arg]
        return
    root = os.path.realpath(dest)
    dirs: list[tarfile.TarInfo] = []
    for member in tar:
        extract(tar, member, root, kind=kind, set_attrs=not member.isdir(), native=False)
        if member.isdir():
            dirs.append(_filtered(member, root, kind))
    for d in sorted(dirs, key=lambda m: m.name, reverse=True):
        _set_attrs(d, os.path.join(root, d.name), kind, numeric_owner=False)


_TRUSTED = {"filter": "fully_trusted"} if NATIVE else {}
"""The fallback has checked the member itself (and a Python with filters warns when none is given)."""


def _native_filter(kind: Kind, member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """tarfile's own filter of ``kind``, after the checks it does not make for ``"tar"``."""
    _check_common(member, os.path.realpath(dest))
    try:
        return getattr(tarfile, f"{kind}_filter")(member, dest)  # type: ignore[no-any-return]
    except tarfile.FilterError as e:
        raise UnsafeArchive(f"tar member refused: {e}") from e


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([os.path.realpath(path), root]) == root


def _check_common(member: tarfile.TarInfo, root: str) -> None:
    """Devices, FIFOs and hard links out of ``root`` (checked for both kinds, on every Python)."""
    if member.isdev():
        raise UnsafeArchive(f"tar member refused: {member.name!r} is a device file or FIFO")
    if member.islnk() and (os.path.isabs(member.linkname) or not _inside(os.path.join(root, member.linkname), root)):
        raise UnsafeArchive(f"tar member refused: the hard link {member.name!r} points outside the destination "
                            f"({member.linkname!r})")


def _filtered(member: tarfile.TarInfo, root: str, kind: Kind) -> tarfile.TarInfo:
    """``member`` as tarfile's filter of ``kind`` would return it (a copy), or UnsafeArchive."""
    _check_common(member, root)
    name = member.name.lstrip("/")
    if not _inside(os.path.join(root, name), root):
        raise UnsafeArchive(f"tar member refused: {member.name!r} would be written outside the destination")
    safe = copy.copy(member)
    safe.name = name
    mode: int | None = member.mode & 0o755
    if kind == "data":
        if member.isreg() or member.islnk():
            mode = (mode if mode & 0o100 else mode & ~0o111) | 0o600  # type: ignore[operator]
        elif member.isdir() or member.issym():
            mode = None
        else:
            raise UnsafeArchive(f"tar member refused: {member.name!r} is not a file, directory or link")
        safe.uid = safe.gid = None  # type: ignore[assignment]
        safe.uname = safe.gname = None  # type: ignore[assignment]
        if member.issym():
            if os.path.isabs(member.linkname):
                raise UnsafeArchive(f"tar member refused: the symlink {member.name!r} points to an absolute path")
            if not _inside(os.path.join(root, os.path.dirname(name), member.linkname), root):
                raise UnsafeArchive(f"tar member refused: the symlink {member.name!r} points outside the "
                                    f"destination ({member.linkname!r})")
    safe.mode = mode  # type: ignore[assignment]
    return safe


def _set_attrs(info: tarfile.TarInfo, path: str, kind: Kind, numeric_owner: bool) -> None:
    """Owner (``"tar"``, as root), mode and modification time of an extracted member, as tarfile sets them."""
    if kind == "tar" and os.geteuid() == 0 and info.uid is not None:
        uid, gid = info.uid, info.gid
        if not numeric_owner:
            import grp
            import pwd

            try:
                uid = pwd.getpwnam(info.uname).pw_uid
            except KeyError:
                pass
            try:
                gid = grp.getgrnam(info.gname).gr_gid
            except KeyError:
                pass
        (os.lchown if info.issym() else os.chown)(path, uid, gid)
    if info.issym():
        return
    if info.mode is not None:
        os.chmod(path, info.mode)
    os.utime(path, (info.mtime, info.mtime))
