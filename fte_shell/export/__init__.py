"""Runs in the field's own formats (docs/export.md): Inspect AI eval logs (:mod:`.inspect_log`, the
``inspect`` extra) and ATIF trajectories (:mod:`.atif_trajectory`, the ``atif`` extra), both read from the
run record through :mod:`.common`. The third-party libraries are imported inside the functions that use
them, so this package imports without them."""
