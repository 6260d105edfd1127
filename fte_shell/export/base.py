"""THE exporter seam: ``fte-shell export NAME PATHS… --out OUT [--OPTION VALUE…]``, one command path for
every exporter (docs/export.md, "Adding an exporter").

An exporter (:class:`Exporter`) has a name, a one-line summary (``fte-shell export --help``), what it reads
(:data:`Reads`), what ``--out`` is, and an options model (a
:class:`~fte_shell.config.base.StrictModel`: one ``--flag`` per field on its command line, the field's
docstring its help); :meth:`Exporter.require` names the extra it lacks, :meth:`Exporter.export` writes
and returns an :class:`Exported`, which the command prints the same way for every exporter.

Built in (:data:`EXPORTERS`): ``inspect``, ``atif``, ``browsecomp-plus``; a third-party exporter is named by
reference, ``fte-shell export mypkg.mod:EXPORTER …``, with no change to fte-shell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from ..config.base import StrictModel
from ..errors import FteError
from ..plugins import Registry


class ExportError(FteError):
    """An export cannot be made (an extra that is not installed, an ``--out`` or option that does not fit)."""


def missing_extra(extra: str, package: str) -> ExportError:
    """The error for an export whose library is not installed."""
    return ExportError(f"{package} is not installed; install the extra: pip install 'fte-shell[{extra}]'")


Reads = Literal["runs", "sweep"]
"""What an exporter reads: ``runs`` — any sweep directories and/or run directories; ``sweep`` — one sweep
directory (the ``--out`` of ``fte-shell bench``)."""


@dataclass
class Exported:
    """What an export wrote (every exporter returns one; the command prints it)."""

    what: str
    """What one file is, singular (``eval log``, ``run file``): the summary says ``3 eval log(s)``."""
    files: list[Path] = field(default_factory=list)
    """Every file written."""
    left_out: int = 0
    """Runs read but not written (a note says why)."""
    notes: list[str] = field(default_factory=list)
    """What the user must know (one line each)."""


class NoOptions(StrictModel):
    """The options of an exporter that has none."""


@runtime_checkable
class Exporter(Protocol):
    """An exporter (see the module docstring)."""

    name: str
    """Its name on the command line (a built-in's registry name)."""
    summary: str
    """One line: what it writes (``fte-shell export --help``)."""
    reads: Reads
    """What its PATHS are."""
    writes: str
    """One line: what ``--out`` is (a file, a directory and its layout)."""
    options_model: type[BaseModel]
    """Its options (a StrictModel, a docstring per field; :class:`NoOptions` when it has none). Fields are
    scalars (str, int, float, bool, a Literal); ``--flag`` spells the field ``flag``."""

    def require(self) -> None:
        """Raise :class:`ExportError` naming the extra to install (:func:`missing_extra`) when a library it
        needs is missing; nothing otherwise."""
        ...

    def export(self, paths: Sequence[Path], out: Path, options: Any, on_run: Callable[[Any], None]) -> Exported:
        """Write the runs under ``paths`` to ``out`` (``options``: an ``options_model``); call ``on_run`` once
        per run gone through (the progress bar). Raises :class:`fte_shell.errors.FteError` (one line) when it
        cannot be made."""
        ...


EXPORTERS: Registry[Exporter] = Registry("exporter", {
    "inspect": "fte_shell.export.inspect_log:EXPORTER",
    "atif": "fte_shell.export.atif_trajectory:EXPORTER",
    "browsecomp-plus": "fte_shell.export.browsecomp_plus:EXPORTER",
})
"""Every exporter: the built-ins by name; ``get("mypkg.mod:EXPORTER")`` loads a third-party one."""


def exporter_options(exporter: Exporter, given: Mapping[str, Any]) -> BaseModel:
    """``given`` (field -> value as typed; absent fields take their defaults) validated by the exporter's
    options model; :class:`ExportError` in one line naming the first problem (an unknown key among them)."""
    try:
        return exporter.options_model.model_validate(dict(given))
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(x) for x in err["loc"]) or "options"
        if err["type"] == "extra_forbidden":
            known = ", ".join(exporter.options_model.model_fields) or "none"
            raise ExportError(f"export {exporter.name}: no option {key!r} (its options: {known})") from None
        raise ExportError(f"export {exporter.name}: option {key}: {err['msg']}") from None
