"""``mlfabric fabric up --cli`` works as in the p4lang tutorials: Mininet's commands print, and
``pingall`` reaches every host; input piped from a file ends it and tears it down, and so do
SIGTERM and SIGHUP (and SIGINT when no terminal is attached) while the CLI waits for input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_the_mininet_cli_prints_and_pingall_reaches_everyone(target_name: str, tmp_path) -> None:
    env = {**os.environ, "MLFABRIC_STATE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "controller.cli", "fabric", "up", "topologies/rail-only-4x4.yaml",
                           "--target", target_name, "--cli", "--run-dir", str(tmp_path / "run")], input="nodes\npingall\nexit\n", cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    assert "rail0 rail1 rail2 rail3 s0 s1 s2 s3" in out, "nodes printed"
    assert "Results: 0% dropped (12/12 received)" in out, "pingall reached every host"
    assert out.count("*** Ping: testing ping reachability") == 1, "each line once"
    assert "torn down" in out and not (tmp_path / "current-fabric.yaml").exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_tears_down_a_fabric_whose_cli_waits_for_input(sig: signal.Signals, target_name: str,
                                                                 tmp_path) -> None:
    env = {**os.environ, "MLFABRIC_STATE_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "controller.cli", "fabric", "up", "topologies/rail-only-4x4.yaml",
                             "--target", target_name, "--cli"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, cwd=REPO, env=env, text=True)
    assert proc.stdout is not None
    seen = []
    try:
        for line in proc.stdout:  # the stdin pipe stays open: the CLI waits for a command
            seen.append(line)
            if "*** Starting CLI" in line:
                break
        else:
            pytest.fail("the CLI did not start: " + "".join(seen)[-2000:])
        proc.send_signal(sig)
        rest: list[str] = []  # drained while it tears down, so a full pipe cannot hold it up
        reader = threading.Thread(target=lambda: rest.append(proc.stdout.read()), daemon=True)
        reader.start()
        try:
            proc.wait(timeout=60)  # stdin stays open: not communicate(), whose EOF would end the CLI anyway
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # every thread's stack, for the report
            time.sleep(2)
            proc.kill()
            reader.join(10)
            pytest.fail(f"{sig.name} did not end it within 60 s; its output and stacks:\n"
                        + "".join(seen)[-1000:] + "".join(rest)[-6000:])
        reader.join(10)
        out = "".join(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "torn down" in out, "".join(seen)[-1000:] + out[-2000:]
    assert proc.returncode == 0
    assert not (tmp_path / "current-fabric.yaml").exists()
    assert list(tmp_path.glob("fabric-*.json")) == [], "its record is removed"
