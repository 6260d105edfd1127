"""``fte-shell view``: a local viewer of run and sweep directories — the sweep's runs and its question ×
profile matrix, every turn of a run, the workspace with the lines each grep/read touched, two runs side by
side. Plain HTML/CSS/JS shipped in the package; served on loopback or written as a self-contained site."""

from __future__ import annotations

from .data import Catalog
from .server import ViewerServer
from .site import Site, write_static

__all__ = ["Catalog", "Site", "ViewerServer", "write_static"]
