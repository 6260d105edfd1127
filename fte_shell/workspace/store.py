"""The workspace store: a directory of fetched documents, written only through :class:`Workspace`.

Every writer (the gateway behind the shell ``fetch`` helper, the structured ``fetch`` tool) goes through
:class:`Workspace`, so the same page snapshot produces byte-identical files under every interface (the
format: :mod:`fte_shell.workspace.format`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..errors import ToolError
from ..keyed_lock import KeyedLocks
from .document import Document, Entry, FetchRecord, Kind
from .format import filename_for, parse_header, render


class Workspace:
    """A directory of fetched documents, mounted in the container at ``mount`` (read-only there).

    Writes are atomic (temporary file in the same directory, then an exclusive hard link), idempotent
    (a document already held is never rewritten) and thread-safe. Files are mode 0644 and the directory
    is made world-searchable, so the container's non-root user can read them.
    """

    def __init__(self, root: Path | str, mount: str = "/work"):
        self.root = Path(root)
        self.mount = mount.rstrip("/") or "/"
        self.root.mkdir(parents=True, exist_ok=True)
        mode = self.root.stat().st_mode & 0o7777
        if mode & 0o755 != 0o755:
            try:
                os.chmod(self.root, mode | 0o755)
            except PermissionError:
                pass
        self._locks: KeyedLocks[str] = KeyedLocks()
        self._entry_cache: dict[str, tuple[tuple[int, int], Entry | None]] = {}

    # --- names -----------------------------------------------------------------------------------------
    def filename_for(self, source: str, kind: Kind) -> str:
        return filename_for(source, kind)

    def agent_path(self, name: str) -> str:
        return f"{self.mount}/{name}" if self.mount != "/" else f"/{name}"

    # --- read ------------------------------------------------------------------------------------------
    def lookup(self, source: str, kind: Kind) -> FetchRecord | None:
        """The record (``new=False``) of a document already held, else None."""
        name = filename_for(source, kind)
        entry = self._entry(name)
        if entry is None:
            return None
        return FetchRecord(
            path=entry.path, chars=entry.chars, new=False, source=entry.source, title=entry.title
        )

    def _entry(self, name: str) -> Entry | None:
        p = self.root / name
        try:
            st = p.stat()
        except FileNotFoundError:
            return None
        key = (st.st_mtime_ns, st.st_size)
        cached = self._entry_cache.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            source, title, chars = parse_header(p.read_text(encoding="utf-8", errors="replace"))
            entry: Entry | None = Entry(path=self.agent_path(name), source=source, title=title, chars=chars)
        except (ValueError, OSError):
            entry = None
        self._entry_cache[name] = (key, entry)
        return entry

    def entries(self) -> list[Entry]:
        """Every document held, in the order they were stored (then by name)."""
        found: list[tuple[int, str]] = []
        with os.scandir(self.root) as it:
            for de in it:
                if (
                    de.name.startswith(".")
                    or not de.name.endswith(".txt")
                    or not de.is_file(follow_symlinks=False)
                ):
                    continue
                found.append((de.stat(follow_symlinks=False).st_mtime_ns, de.name))
        out = []
        for _, name in sorted(found):
            e = self._entry(name)
            if e is not None:
                out.append(e)
        return out

    def listing_text(self) -> str:
        """The listing shown by ``list_fetched``: one :meth:`Entry.line` per document and a total line."""
        entries = self.entries()
        if not entries:
            return "(no documents fetched yet)"
        total = sum(e.chars for e in entries)
        n = len(entries)
        lines = [e.line() for e in entries]
        lines.append(f"{n} document{'s' if n != 1 else ''}, {total:,} chars")
        return "\n".join(lines)

    def host_path(self, agent_path: str) -> Path:
        """Host path of a workspace file given as the agent sees it (``/work/x.txt``) or by bare name.

        Raises :class:`ToolError` for anything that is not a file directly in the workspace.
        """
        p = agent_path.strip()
        prefix = self.mount + "/" if self.mount != "/" else "/"
        p = p.removeprefix(prefix)
        if not p or "/" in p or "\\" in p or p in (".", "..") or "\x00" in p:
            raise ToolError(f"not a workspace file: {agent_path!r} (expected {prefix}<name>.txt)")
        host = self.root / p
        root = self.root.resolve()
        if host.resolve().parent != root:
            raise ToolError(f"not a workspace file: {agent_path!r}")
        return host

    def body(self, agent_path: str) -> str:
        """The body (header removed) of a held document; ToolError if it is not held."""
        host = self.host_path(agent_path)
        try:
            content = host.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise ToolError(
                f"no such document: {agent_path} (use list_fetched to see what is held)"
            ) from None
        except IsADirectoryError:
            raise ToolError(f"not a workspace file: {agent_path!r}") from None
        parts = content.split("\n", 4)
        return parts[4] if len(parts) == 5 and parts[3] == "" else content

    # --- write -----------------------------------------------------------------------------------------
    def store(self, doc: Document) -> FetchRecord:
        """Write ``doc`` atomically unless already held; returns its record (``new`` says which)."""
        name, content, body = render(doc)
        with self._locks[name]:
            held = self._entry(name)
            if held is not None:
                return FetchRecord(
                    path=held.path, chars=held.chars, new=False, source=held.source, title=held.title
                )
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=self.root)
            try:
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                    f.write(content)
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(tmp, 0o644)
                final = self.root / name
                try:
                    os.link(tmp, final)  # exclusive: never replaces a file another process wrote
                    created = True
                except FileExistsError:
                    created = False
                except OSError:  # file system without hard links
                    os.replace(tmp, final)
                    created = True
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            if not created:
                held = self._entry(name)
                if held is None:  # never report a file as ours that is not (it is left as it is)
                    raise ToolError(f"cannot store {self.agent_path(name)}: a file that is not a fetched document is in the way")
                return FetchRecord(
                    path=held.path, chars=held.chars, new=False, source=held.source, title=held.title
                )
            source, title, _ = parse_header(content)
            return FetchRecord(
                path=self.agent_path(name), chars=len(body), new=True, source=source, title=title,
                retrieved_at=doc.retrieved_at,
            )
