"""`mlfabric fabric up` keeps a fabric running for the CLI and tears it down on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from fabric_process import wait_until_published

from controller.cli import main
from controller.cli.switch_args import current_fabric_path
from controller.netstate import state_dir

REPO = Path(__file__).resolve().parents[2]


def test_fabric_up_serves_the_cli_then_tears_down(target_name: str, capsys, tmp_path: Path) -> None:
    published = current_fabric_path()
    assert not published.exists(), "another emulated fabric is running"
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller.cli.main", "fabric", "up", "topologies/rail-only-4x4.yaml",
         "--target", target_name, "--for", "120", "--run-dir", str(tmp_path / "run")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_published(proc, published, timeout=30)
        assert main(["fabric", "status", "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert [s["reachable"] for s in status["switches"]] == [True] * 4
        assert main(["rules", "show", "rail2", "--json"]) == 0
        rules = json.loads(capsys.readouterr().out)
        assert len(rules["RailIngress.ipv4_lpm"]["entries"]) == 4
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert "torn down" in out
    assert not published.exists()
    # its own record is gone (another fabric, e.g. in another network namespace, may have one)
    assert [p for p in state_dir().glob("fabric-*.json") if f"-{proc.pid}-" in p.name] == []


def test_a_closed_terminal_tears_the_fabric_down(target_name: str, tmp_path: Path) -> None:
    """SIGHUP (the terminal went away) unwinds like Ctrl-C: no switch process is left."""
    published = current_fabric_path()
    assert not published.exists(), "another emulated fabric is running"
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller.cli.main", "fabric", "up", "topologies/rail-only-4x4.yaml",
         "--target", target_name, "--for", "120", "--run-dir", str(tmp_path / "run")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_published(proc, published, timeout=30)
    finally:
        proc.send_signal(signal.SIGHUP)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "torn down" in out, out
    assert not published.exists()
    assert [p for p in state_dir().glob("fabric-*.json") if f"-{proc.pid}-" in p.name] == []
