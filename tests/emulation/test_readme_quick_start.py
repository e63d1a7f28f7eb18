"""The README's quick start works as printed: its commands are read from the README itself,
the fabric is brought up with its ``fabric up`` line, and every command of the second
block runs against it and succeeds."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fabric_process import wait_until_published

#: make test runs this module on both engines: the quick start, as a user on the fallback engine runs it
pytestmark = pytest.mark.both_engines

REPO = Path(__file__).resolve().parents[2]


def quick_start_blocks() -> list[list[str]]:
    """The command lines (comments dropped) of each ``sh`` block of the quick start section."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return [[line.split("#", 1)[0].strip() for line in b.splitlines() if line.split("#", 1)[0].strip()]
            for b in blocks]


def test_the_quick_start_has_a_fabric_and_the_commands_to_use_it() -> None:
    up, use = quick_start_blocks()
    assert up[0] == use[0] == ". .venv/bin/activate"
    assert up[1].startswith("mlfabric fabric up ")
    assert any("ping" in c for c in use) and any("rules show" in c for c in use) and any("counters" in c for c in use)


def test_every_quick_start_command_works_as_printed(target_name: str, tmp_path) -> None:
    if target_name != "python":
        pytest.skip("the quick start uses the default (Python) target")
    up, use = quick_start_blocks()
    env = {**os.environ, "MLFABRIC_STATE_DIR": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    fabric = subprocess.Popen(["bash", "-c", f"{up[0]} && exec {up[1]}"], cwd=REPO, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_until_published(fabric, tmp_path / "current-fabric.yaml", timeout=60)
        outputs = {}
        for command in use[1:]:
            done = subprocess.run(["bash", "-c", f"{use[0]} && {command}"], cwd=REPO, env=env,
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
            outputs[command] = done.stdout
        ping = next(out for c, out in outputs.items() if "ping" in c)
        assert "3 received" in ping
        counters = next(out for c, out in outputs.items() if "counters" in c)
        assert re.search(r"RailIngress\.ipv4_lpm_hits\s+3\s+294", counters), counters
    finally:
        fabric.send_signal(signal.SIGINT)
        fabric.communicate(timeout=60)  # its run folder is under $MLFABRIC_RESULTS_DIR (tests/conftest.py)
    assert fabric.returncode == 0
