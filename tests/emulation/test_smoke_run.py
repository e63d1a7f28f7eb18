"""The Mininet smoke run passes on the selected target and leaves nothing behind."""

from __future__ import annotations

import subprocess

import pytest

from controller.emulation import load_emulation_module
from controller.netstate import state_dir

#: make test runs this module on both engines: forwarding on a small fabric
pytestmark = pytest.mark.both_engines


def _switch_processes() -> list[str]:
    """Running switch processes in this network namespace (others, e.g. another run in its
    own namespace, are not ours), by process name (comm is cut to 15 characters)."""
    import os

    ours = os.readlink("/proc/self/ns/net")
    found = []
    for name in ("mlfabric-switch", "simple_switch_g"):
        out = subprocess.run(["pgrep", "-ax", name], capture_output=True, text=True)
        for line in out.stdout.splitlines():
            try:
                if os.readlink(f"/proc/{line.split()[0]}/ns/net") == ours:
                    found.append(line)
            except OSError:  # it has just exited
                pass
    return found


def _root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    return {line.split(":")[1].strip().split("@")[0] for line in out.stdout.splitlines()}


def test_smoke_run_pings_across_a_p4_switch(target_name: str, capsys) -> None:
    links_before = _root_links()
    procs_before = set(_switch_processes())
    smoke = load_emulation_module("smoke_run")
    assert smoke.main(["--target", target_name]) == 0
    out = capsys.readouterr().out
    assert "3/3 replies" in out
    assert "PASS" in out
    # Torn down: no switch process, no new link, no leftover record.
    assert set(_switch_processes()) <= procs_before
    assert _root_links() <= links_before
    assert list(state_dir().glob("smoke-*.json")) == []


def test_sigterm_mid_run_tears_the_smoke_run_down(target_name: str, tmp_path) -> None:
    import os
    import signal
    import sys
    from pathlib import Path

    links_before = _root_links()
    procs_before = set(_switch_processes())
    env = {**os.environ, "MLFABRIC_STATE_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "controller.cli", "smoke", "--target", target_name],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None
    for line in proc.stdout:
        if "switch s1 up" in line:  # the network and the switch exist now
            proc.send_signal(signal.SIGTERM)
            break
    out = proc.stdout.read()
    proc.wait(timeout=60)
    assert "Traceback" not in out, out
    assert set(_switch_processes()) <= procs_before
    assert _root_links() <= links_before
    assert list(tmp_path.glob("smoke-*.json")) == []
