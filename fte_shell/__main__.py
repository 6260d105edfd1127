"""``python -m fte_shell`` is the same as the ``fte-shell`` command."""

from .cli import main

main()
