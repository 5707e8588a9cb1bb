"""The ``limno`` command: a thin layer over the Python API."""

from limno.cli._main import cli, main

__all__ = ["cli", "main"]
