"""The package version (the one place it is written; nothing inside the package imports the root), and
the one-line note of an old spelling still accepted until a later release."""

__version__ = "0.1.0"


def renamed_line(old: str, new: str, removed_in: str) -> str:
    """The note printed when ``old`` (a flag, a command, a preset name) is used: what to write instead."""
    return f"note: {old} is an old spelling, accepted until fte-shell {removed_in}: use {new}"
