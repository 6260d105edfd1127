"""Runs in the field's own formats (docs/export.md): every exporter a plugin of :data:`.base.EXPORTERS`
(the seam :class:`.base.Exporter`, one ``fte-shell export NAME`` command each) — Inspect AI eval logs
(:mod:`.inspect_log`, the ``inspect`` extra), ATIF trajectories (:mod:`.atif_trajectory`, the ``atif`` extra)
and BrowseComp-Plus run files (:mod:`.browsecomp_plus`), read from the run record through :mod:`.common`.
The third-party libraries are imported inside the functions that use them, so this package imports
without them."""
