"""The ``mlfabric`` command line."""

from controller.cli.main import main

__all__ = ["main"]
