"""Find the external tools mlfabric can use and report their versions."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

__all__ = ["Tool", "find_tool", "p4c_version"]


@dataclass(frozen=True, slots=True)
class Tool:
    """An external executable: where it is (None when absent) and its version."""

    name: str
    path: str | None
    version: str | None

    @property
    def present(self) -> bool:
        return self.path is not None


def _version_of(path: str, flag: str = "--version") -> str | None:
    try:
        out = subprocess.run(
            [path, flag], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    match = re.search(r"\d+\.\d+(\.\d+)*(\S*)", text)
    return match.group(0) if match else (text.splitlines()[0] if text else None)


def find_tool(name: str, flag: str = "--version") -> Tool:
    """Locate ``name`` on PATH (and in /usr/local/bin) and ask it for its version.

    >>> find_tool("definitely-not-a-tool").present
    False
    """
    path = shutil.which(name) or shutil.which(name, path="/usr/local/bin")
    return Tool(name, path, _version_of(path, flag) if path else None)


def p4c_version() -> str | None:
    return find_tool("p4c-bm2-ss").version
