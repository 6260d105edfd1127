"""The package version (the one place it is written; nothing inside the package imports the root)."""

__version__ = "0.1.0"
