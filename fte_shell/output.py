"""Turning raw command output (any bytes) into a bounded, clean observation text.

Used by the shell session and by every other profile that shows the model text it did not write.
"""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), other two-byte ESC sequences, and 8-bit CSI.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
    r"|\x1b."
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
# C0 controls except \t and \n, DEL, C1 controls (\r is removed too: it only moves the cursor).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean_text(data: bytes | str) -> str:
    """Decode UTF-8 with replacement, strip ANSI escape sequences and control characters except \\n, \\t.

    Carriage returns: ``\\r\\n`` becomes ``\\n``; a lone ``\\r`` is removed.
    """
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    if "\x1b" in text or "\x9b" in text:
        text = _ANSI.sub("", text)
    text = text.replace("\r\n", "\n")
    return _CONTROL.sub("", text)


def truncation_line(omitted: int, note: str = "") -> str:
    """The line that replaces the middle of a long output."""
    extra = f"; {note}" if note else ""
    return f"[... output truncated: {omitted:,} bytes omitted{extra} ...]"


def _cut_utf8(data: bytes, n: int, *, from_end: bool = False) -> bytes:
    """At most ``n`` bytes of ``data`` without splitting a UTF-8 character at the cut."""
    if len(data) <= n:
        return data
    if not from_end:
        cut = n
        while cut > 0 and cut > n - 4 and (data[cut] & 0xC0) == 0x80:
            cut -= 1
        return data[: cut if (data[cut] & 0xC0) != 0x80 else n]
    start = len(data) - n
    s = start
    while s < len(data) and s < start + 4 and (data[s] & 0xC0) == 0x80:
        s += 1
    return data[s:]


def split_cap(cap: int) -> tuple[int, int]:
    """How many raw bytes of head and of tail a capped observation keeps."""
    head = max(cap // 2, 0)
    return head, max(cap - head, 0)


def align_to_lines(head: bytes, tail: bytes, omitted: int) -> tuple[bytes, bytes, int]:
    """Cut the head after its last newline and start the tail after its first one, when that loses at
    most a quarter of each, so the truncation line sits between whole lines. Returns the new head, tail
    and omitted count (which grows by what was cut)."""
    i = head.rfind(b"\n")
    if i >= 0 and len(head) - (i + 1) <= len(head) // 4:
        omitted += len(head) - (i + 1)
        head = head[: i + 1]
    j = tail.find(b"\n")
    if 0 <= j < len(tail) - 1 and j + 1 <= len(tail) // 4:
        omitted += j + 1
        tail = tail[j + 1 :]
    return head, tail, omitted


def join_head_tail(head: bytes, tail: bytes, omitted: int, note: str = "") -> str:
    """Clean a head and a tail (aligned to whole lines when cheap) and join them with the truncation
    line."""
    head, tail, omitted = align_to_lines(head, tail, omitted)
    h = clean_text(head)
    t = clean_text(tail)
    if h and not h.endswith("\n"):
        h += "\n"
    return f"{h}{truncation_line(omitted, note)}\n{t}"


def cap_output(data: bytes, cap: int) -> tuple[str, bool]:
    """Clean ``data`` and keep at most ``cap`` raw bytes of it: a head and a tail around a line like
    ``[... output truncated: 1,234,567 bytes omitted ...]``. Returns ``(text, truncated)``."""
    if cap <= 0:
        return (truncation_line(len(data)) if data else ""), bool(data)
    if len(data) <= cap:
        return clean_text(data), False
    nh, nt = split_cap(cap)
    head = _cut_utf8(data, nh)
    tail = _cut_utf8(data, nt, from_end=True) if nt else b""
    return join_head_tail(head, tail, len(data) - len(head) - len(tail)), True
