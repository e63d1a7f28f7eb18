"""``mlfabric rules diff|sync|install TOPOLOGY`` on the very file a running ``fabric up`` was
brought up from: the file has no gRPC addresses, the running fabric lends its own."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from fabric_process import wait_until_published

from controller.cli import main
from controller.cli.switch_args import current_fabric_path
from controller.topology import dump_topology, rail_only

REPO = Path(__file__).resolve().parents[2]
TOPO = "topologies/rail-only-4x4.yaml"


def test_fabric_commands_take_the_running_fabrics_addresses(target_name: str, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    published = current_fabric_path()
    assert not published.exists(), "another emulated fabric is running"
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller.cli.main", "fabric", "up", TOPO, "--target", target_name, "--for", "300"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_published(proc, published, timeout=60)
        assert main(["rules", "diff", TOPO, "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert [(r["status"], r["diff"]) for r in rows] == [("ok", "0 missing, 0 changed, 0 extra")] * 4

        assert main(["rules", "add", "rail0", "ipv4_lpm", "dst_addr=11.0.0.0/16", "drop"]) == 0
        assert main(["rules", "diff", TOPO]) == 1
        out = capsys.readouterr().out
        assert "rail0: 0 missing, 0 changed, 1 extra" in out and "extra  ipv4_lpm  dst_addr=11.0.0.0/16  drop()" in out
        assert main(["rules", "sync", TOPO, "--json"]) == 0
        assert [r["entries"] for r in json.loads(capsys.readouterr().out) if r["switch"] == "rail0"] == [1]
        assert main(["rules", "install", TOPO, "--json"]) == 0
        assert all(r["status"] == "ok" for r in json.loads(capsys.readouterr().out))
        assert main(["rules", "diff", TOPO, "--json"]) == 0
        capsys.readouterr()

        other = tmp_path / "other.yaml"
        dump_topology(rail_only(2, 2), other)
        assert main(["rules", "diff", str(other)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "has other switches" in err and f"mlfabric fabric up {other}" in err
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
