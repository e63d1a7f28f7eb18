"""NetRecord removes what it recorded, and clean-net removes what a dead owner left."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller import netstate


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MLFABRIC_STATE_DIR", str(tmp_path))
    return tmp_path


def _sleeper(marker: str) -> subprocess.Popen:
    """A process whose command line carries ``marker`` (once it has exec'd)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
    deadline = time.monotonic() + 5
    while marker not in Path(f"/proc/{proc.pid}/cmdline").read_text(errors="replace"):
        assert time.monotonic() < deadline, "sleeper did not start"
        time.sleep(0.01)
    return proc


def test_leaving_the_block_kills_recorded_processes() -> None:
    proc = _sleeper("mlf-test-marker-1")
    with netstate.NetRecord("unit") as rec:
        rec.add_pid(proc.pid, "mlf-test-marker-1")
    assert proc.wait(timeout=5) is not None
    assert not rec.path.exists()


def test_a_process_whose_command_line_changed_is_left_alone() -> None:
    proc = _sleeper("mlf-test-marker-2")
    try:
        with netstate.NetRecord("unit") as rec:
            rec.add_pid(proc.pid, "some-other-marker")
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_clean_all_removes_records_of_dead_owners(private_state_dir: Path) -> None:
    proc = _sleeper("mlf-test-marker-3")
    record = private_state_dir / "crashed-999999-deadbeef.json"
    record.write_text(json.dumps({"name": "crashed", "pids": [[proc.pid, "mlf-test-marker-3"]], "links": [], "netns": []}))
    removed = netstate.clean_all(only_dead_owners=True)
    assert any(str(proc.pid) in r for r in removed)
    assert proc.wait(timeout=5) is not None
    assert not record.exists()


def test_clean_all_keeps_records_of_live_owners(private_state_dir: Path) -> None:
    owner = _sleeper("mlf-owner")
    try:
        record = private_state_dir / f"live-{owner.pid}-cafe.json"
        record.write_text(json.dumps({"name": "live", "pids": [], "links": [], "netns": []}))
        assert netstate.clean_all(only_dead_owners=True) == []
        assert record.exists()
    finally:
        owner.kill()
        owner.wait()


def test_an_interface_is_blamed_on_its_live_owner_before_a_dead_record_naming_it(private_state_dir: Path) -> None:
    owner = _sleeper("mlf-owner-2")
    try:
        links = {"pids": [], "links": ["rail0-eth1"], "netns": []}
        (private_state_dir / "fabric-a-999999-dead.json").write_text(json.dumps({"name": "old", **links}))
        assert "ended without cleaning up" in netstate.interface_owner("rail0-eth1")
        (private_state_dir / f"fabric-b-{owner.pid}-beef.json").write_text(json.dumps({"name": "new", **links}))
        assert netstate.interface_owner("rail0-eth1").startswith(f"new is running (pid {owner.pid})")
        assert netstate.interface_owner("rail9-eth9").startswith("no mlfabric run recorded it")
    finally:
        owner.kill()
        owner.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a veth needs root")
def test_recorded_links_are_deleted() -> None:
    with netstate.NetRecord("unit") as rec:
        rec.add_link("mlfut0")
        subprocess.run(["ip", "link", "add", "mlfut0", "type", "veth", "peer", "name", "mlfut1"], check=True)
    assert not Path("/sys/class/net/mlfut0").exists()


def test_clean_net_keeps_live_runs_and_removes_a_stale_published_fabric(private_state_dir: Path, capsys) -> None:
    from controller.cli import main
    from controller.topology import dump_topology, rail_only

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = private_state_dir / f"fabric-live-{sleeper.pid}-abcd1234.json"
        live.write_text(json.dumps({"name": "fabric-live", "pids": [], "links": [], "netns": []}))
        published = private_state_dir / "current-fabric.yaml"
        topo = rail_only(2, 1)
        dump_topology(dataclasses.replace(topo, params={**topo.params, "owner_pid": 999_999_999}), published)
        assert main(["fabric", "status"]) == 1
        assert "stale: the run that published it is gone" in capsys.readouterr().out
        assert main(["clean-net"]) == 0
        out = capsys.readouterr().out
        assert live.exists() and f"kept fabric-live: its run (pid {sleeper.pid}) is alive" in out
        assert not published.exists() and "stale published fabric" in out
        assert main(["clean-net", "--force"]) == 0
        assert not live.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
