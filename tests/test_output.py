"""fte_shell.sandbox.output: decoding, cleaning and head+tail capping (pure functions, no Docker)."""

from __future__ import annotations

import re

from fte_shell.sandbox.output import (
    align_to_lines,
    cap_output,
    clean_text,
    join_head_tail,
    truncation_line,
)


def test_clean_text_strips_ansi_and_controls_keeps_newline_and_tab() -> None:
    raw = b"\x1b[31mred\x1b[0m\tok\x00\x01\x07\x1b]0;title\x07end\r\nnext\rline\x7f\n"
    assert clean_text(raw) == "red\tokend\nnextline\n"


def test_clean_text_decodes_invalid_utf8_with_replacement() -> None:
    assert clean_text(b"caf\xc3\xa9 \xff\xfe ok") == "café \ufffd\ufffd ok"


def test_clean_text_short_way_and_long_way_agree() -> None:
    # valid UTF-8 without ESC or 0xC2 (the short way): C0 controls and DEL go, \t and \n stay
    assert clean_text(b"a\r\nb\rc\x00d\x7fe\tf\n\xe4\xb8\xad") == "a\nbcde\tf\n\u4e2d"
    assert clean_text(bytearray(b"plain\n")) == "plain\n"
    # invalid UTF-8 split by a control byte: decoded first (3 replacement characters), never joined
    assert clean_text(b"\xe4\x01\xb8\xad") == "\ufffd\ufffd\ufffd"
    # a C1 control (0xC2 0x85) goes, a Latin-1 sign (0xC2 0xB0) stays
    assert clean_text(b"\xc2\x85x\xc2\xb0\r\n") == "x\u00b0\n"


def test_clean_text_keeps_non_ascii() -> None:
    s = "héllo wörld ✓ 日本語 🙂"
    assert clean_text(s.encode()) == s


def test_cap_output_short_is_untouched() -> None:
    assert cap_output(b"hello\n", 100) == ("hello\n", False)


def test_cap_output_head_tail_and_exact_omitted_count() -> None:
    data = b"".join(b"%d\n" % i for i in range(1, 100_001))
    text, truncated = cap_output(data, 1000)
    assert truncated
    m = re.search(r"\n\[\.\.\. output truncated: ([\d,]+) bytes omitted \.\.\.\]\n", text)
    assert m is not None
    head, tail = text[: m.start() + 1], text[m.end() :]
    # every byte is either shown or counted, and the cut falls between whole lines
    assert len(head) + len(tail) + int(m.group(1).replace(",", "")) == len(data)
    assert len(head) + len(tail) <= 1000
    assert text.startswith("1\n2\n3\n") and head.endswith("\n")
    assert text.endswith("99999\n100000\n")
    assert data.startswith(head.encode()) and data.endswith(tail.encode())
    assert tail.split("\n")[0] in {str(i) for i in range(90_000, 100_001)}


def test_align_to_lines_only_when_cheap() -> None:
    assert align_to_lines(b"ab\ncd", b"ef\ngh", 10) == (b"ab\ncd", b"ef\ngh", 10)  # would lose half
    assert align_to_lines(b"abcdefg\nh", b"x\nabcdefg", 10) == (b"abcdefg\n", b"abcdefg", 13)


def test_cap_output_binary_has_no_control_characters() -> None:
    data = bytes(range(256)) * 1000
    text, truncated = cap_output(data, 5000)
    assert truncated
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text)


def test_cap_output_does_not_split_utf8_characters() -> None:
    data = "é".encode() * 10_000  # two bytes each: any odd cut would split one
    text, truncated = cap_output(data, 1001)
    assert truncated
    assert "\ufffd" not in text


def test_cap_output_one_huge_line() -> None:
    data = b"a" * 3_000_000
    text, truncated = cap_output(data, 2000)
    assert truncated and len(text) < 2200
    assert text.startswith("a" * 1000) and text.endswith("a" * 1000)
    assert "2,998,000 bytes omitted" in text


def test_truncation_line_and_join() -> None:
    assert truncation_line(1234567) == "[... output truncated: 1,234,567 bytes omitted ...]"
    joined = join_head_tail(b"head", b"tail\n", 10, "buffer full")
    assert joined == "head\n[... output truncated: 10 bytes omitted; buffer full ...]\ntail\n"


def test_cap_zero() -> None:
    assert cap_output(b"abc", 0) == ("[... output truncated: 3 bytes omitted ...]", True)
    assert cap_output(b"", 0) == ("", False)
