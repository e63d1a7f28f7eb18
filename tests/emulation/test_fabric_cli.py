"""``mlfabric fabric up --cli`` works as in the p4lang tutorials: Mininet's commands print, and
``pingall`` reaches every host; input piped from a file ends it and tears it down."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
