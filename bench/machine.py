"""Describe the machine a benchmark ran on."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path


def describe() -> dict[str, object]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    bmv2 = shutil.which("simple_switch_grpc")
    bmv2_version = None
    if bmv2:
        out = subprocess.run([bmv2, "--version"], capture_output=True, text=True, check=False)
        bmv2_version = (out.stdout or out.stderr).strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "bmv2": bmv2_version,
    }
