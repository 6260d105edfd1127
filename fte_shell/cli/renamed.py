"""Old spellings that still work for one release, each with a one-line note naming the new one.

A renamed flag of the option table is a :class:`Renamed` entry of its row (``cli/options.py``): a hidden
option that checks the old value, prints the note and hands the row its value. A renamed command calls
:func:`renamed_note` and then the new one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from ..version import renamed_line


def renamed_note(old: str, new: str, removed_in: str) -> None:
    """The one-line note of a renamed flag or command that still works: ``old`` and what to write instead."""
    typer.echo(renamed_line(old, new, removed_in), err=True)


@dataclass(frozen=True)
class Renamed:
    """An old spelling of a row's flag, still accepted (hidden from ``--help``) until ``removed_in``."""

    decl: str
    """The old flag (``--method``)."""

    commands: frozenset[str]
    """The commands that had it."""

    removed_in: str
    """The first release that no longer accepts it (a test fails once the package reaches it)."""

    values: Mapping[str, str | None] | None = None
    """Old value -> the row's value (None: leave the flag out, the default); None: the value as given."""

    @property
    def param(self) -> str:
        """The command function's parameter name (``renamed_method``)."""
        return "renamed_" + self.decl.lstrip("-").replace("-", "_")

    def option(self, new_flag: str) -> Any:
        """A hidden option that checks the old value, prints the note and hands on the row's value."""

        def translate(value: str | None) -> str | None:
            if value is None:
                return None
            if self.values is not None and value not in self.values:
                raise typer.BadParameter(f"{self.decl} takes {', '.join(self.values)} (now: {new_flag})")
            new = self.values[value] if self.values is not None else value
            renamed_note(f"{self.decl} {value}", f"{new_flag} {new}" if new is not None else
                         f"no {new_flag} (the default)", self.removed_in)
            return new

        return Annotated[str | None, typer.Option(self.decl, hidden=True, callback=translate)]
