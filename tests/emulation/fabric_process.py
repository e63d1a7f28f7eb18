"""Waiting for a ``fabric up`` started as a subprocess by a test."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def wait_until_published(proc: subprocess.Popen[str], published: Path, timeout: float = 60.0) -> None:
    """Poll until the fabric publishes ``published``; fail with its output if it died first."""
    deadline = time.monotonic() + timeout
    while not published.exists():
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert time.monotonic() < deadline, "the fabric did not come up"
        time.sleep(0.1)
