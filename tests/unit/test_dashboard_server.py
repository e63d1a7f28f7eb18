"""The dashboard without a fabric: the journal the test writes and counters it writes drive the
sampler; the stream pushes samples, unknown pages are 404, a kept run replays, and the CLI
refuses bad input in one line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from controller.dashboard import journal
from controller.dashboard.client import next_samples
from controller.dashboard.live import LiveSampler, read_counters
from controller.dashboard.rates import link_rates
from controller.dashboard.recorder import FILE_NAME, Recorder, Recording
from controller.dashboard.server import Dashboard, replay
from controller.topology import rail_only
from controller.topology.loader import topology_to_dict

REPO = Path(__file__).resolve().parents[2]


def _write(root: Path, name: str, tx: int, rx: int) -> None:
    stats = root / name / "statistics"
    stats.mkdir(parents=True, exist_ok=True)
    for key, value in (("tx_bytes", tx), ("rx_bytes", rx), ("tx_dropped", 0), ("rx_dropped", 0)):
        (stats / key).write_text(f"{value}\n")


def _until(check, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MLFABRIC_STATE_DIR", str(tmp_path / "state"))
    return tmp_path


def test_counters_of_missing_or_broken_interfaces_are_left_out(tmp_path: Path) -> None:
    _write(tmp_path, "rail0-eth1", 10, 20)
    (tmp_path / "rail0-eth2" / "statistics").mkdir(parents=True)
    assert read_counters(["rail0-eth1", "rail0-eth2", "nope"], tmp_path) == {"rail0-eth1": (10, 20)}


def test_a_counter_that_went_backwards_reads_zero_and_time_must_pass() -> None:
    topo = rail_only(2, 1, rate_mbps=10)
    (r, _) = link_rates(topo, {"rail0-eth1": (500, 500), "rail0-eth2": (0, 0)},
                        {"rail0-eth1": (100, 100), "rail0-eth2": (0, 0)}, 1.0)
    assert r.tx_mbps == 0 and r.rx_mbps == 0 and r.utilisation == 0
    with pytest.raises(ValueError, match="seconds must be positive"):
        link_rates(topo, {}, {}, 0.0)


def test_the_journal_is_tailed_across_processes_partial_lines_and_a_fresh_start(state: Path) -> None:
    reader = journal.JournalReader()
    assert reader.read() == []
    journal.record("run", experiment="x", folder="f")
    subprocess.run([sys.executable, "-c", "from controller.dashboard import journal; journal.record('unit', index=1)"],
                   cwd=REPO, env={**os.environ}, check=True, timeout=60)
    with journal.journal_path().open("a") as f:
        f.write('{"kind": "verdict"')  # a line still being written
    assert [e["kind"] for e in reader.read()] == ["run", "unit"]
    with journal.journal_path().open("a") as f:
        f.write(', "comparison": "c"}\nnot json\n')
    assert [e["kind"] for e in reader.read()] == ["verdict"]
    journal.journal_path().write_text("")  # started afresh
    journal.record("fabric-down", name="t")
    assert [e["kind"] for e in reader.read()] == ["fabric-down"]


def test_a_journal_that_cannot_be_written_costs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(journal, "journal_path", lambda: tmp_path / "file" / "events.jsonl")
    journal.record("run", experiment="x", value=float("nan"))  # neither raises


def test_samples_follow_the_journal_and_the_counters(state: Path) -> None:
    topo = rail_only(2, 1, rate_mbps=10)
    counters = state / "net"
    for name in ("rail0-eth1", "rail0-eth2"):
        _write(counters, name, 0, 0)
    sampler = LiveSampler(0.1, counters_root=counters, queues=False)
    with Dashboard(sampler, port=0) as board:
        empty = json.loads(urllib.request.urlopen(board.url + "api/topology", timeout=5).read())
        assert empty["name"] is None and empty["nodes"] == []
        journal.record("fabric-up", topology=topology_to_dict(topo), switch_pids={"rail0": os.getpid()})
        drawn = _until(lambda: json.loads(urllib.request.urlopen(board.url + "api/topology", timeout=5).read())["name"])
        assert drawn == topo.name
        _until(lambda: board.latest()["links"])  # rates across one fabric: two readings of it
        _write(counters, "rail0-eth1", 10**9, 0)  # far more than any interval's worth
        busy = _until(lambda: [r for r in board.latest()["links"] if r["tx_mbps"] > 0])
        switches = board.latest()["switches"]
        journal.record("run", experiment="rail-only", folder=str(state))
        journal.record("verdict", comparison="allreduce", outcome="decided", decided=True, why="even")
        verdicts = _until(lambda: board.latest()["verdicts"])
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(board.url + "nope", timeout=5)
        with pytest.raises(urllib.error.HTTPError) as no_switch:
            urllib.request.urlopen(board.url + "api/tables/spine9", timeout=5)
        journal.record("fabric-down", name=topo.name)
        gone = _until(lambda: board.latest()["fabric"] is None and board.latest()["links"] == [])
    assert [r["interface"] for r in busy] == ["rail0-eth1"] and busy[0]["utilisation"] > 1
    assert [s["switch"] for s in switches] == ["rail0"] and switches[0]["cpu"] is not None
    assert [p["interface"] for p in switches[0]["ports"]] == ["rail0-eth1", "rail0-eth2"]
    assert verdicts[0]["comparison"] == "allreduce" and board.latest()["run"]["experiment"] == "rail-only"
    assert missing.value.code == 404 and no_switch.value.code == 404
    assert gone


def test_a_fabric_whose_process_died_is_dropped(state: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True, timeout=60)
    journal.record("fabric-up", topology=topology_to_dict(rail_only(2, 1)), switch_pids={})
    events = journal.JournalReader().read()
    with journal.journal_path().open("w") as f:  # the same fabric, brought up by a process that is gone
        f.write(json.dumps({**events[0], "pid": int(dead.stdout)}) + "\n")
    sampler = LiveSampler(0.1, counters_root=state, queues=False)
    sampler.follow()
    assert sampler.topo is None and sampler.view.fabric is None


def test_a_recorded_run_replays_in_order_with_its_drawing(state: Path) -> None:
    folder = state / "run"
    folder.mkdir()
    drawing = {"name": "t", "nodes": [{"name": "s0", "kind": "host", "x": 0, "y": 0}], "links": []}
    with Recorder(folder / FILE_NAME) as r:
        r.topology(1, drawing)
        for seq in (1, 2, 3):
            r.sample({"seq": seq, "t": 100.0 + seq * 0.01, "fabric_seq": 1, "links": [], "switches": []})
    with Dashboard(replay(folder, speed=10), port=0) as board:
        got = next_samples(board.url, 3)
        shown = json.loads(urllib.request.urlopen(board.url + "api/topology", timeout=5).read())
    assert [s["seq"] for s in got] == [1, 2, 3] and got[-1]["replay"] == {"index": 3, "of": 3, "folder": str(folder)}
    assert shown["name"] == "t" and shown["fabric_seq"] == 1
    assert [s["seq"] for s in Recording(folder / FILE_NAME).samples()] == [1, 2, 3]


def test_a_live_sampler_records_only_runs_that_start_after_it(state: Path) -> None:
    old, new = state / "old", state / "new"
    old.mkdir(), new.mkdir()
    journal.record("run", experiment="x", folder=str(old))
    time.sleep(0.01)
    sampler = LiveSampler(0.05, counters_root=state, queues=False, record=True)
    journal.record("run", experiment="x", folder=str(new))
    with Dashboard(sampler, port=0) as board:
        _until(lambda: board.latest()["seq"] >= 2)
        journal.record("run-end", status="decided")
        _until(lambda: (board.latest().get("run") or {}).get("status") == "decided")
        ended = board.latest()["seq"]
        _until(lambda: board.latest()["seq"] > ended + 1)  # samples after the run's end are not kept
    assert not (old / FILE_NAME).exists()
    kept = Recording(new / FILE_NAME)
    assert [e["kind"] for e in kept.events()] == ["run", "run-end"] and kept.samples()
    assert kept.samples()[-1]["run"]["status"] == "decided"


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "controller.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)


def test_the_cli_refuses_bad_input_in_one_line(state: Path) -> None:
    env = {**os.environ, "MLFABRIC_STATE_DIR": str(state / "state")}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cases = {("dashboard", "--port", "70000"): "--port",
                 ("dashboard", "--replay", str(state)): "holds no dashboard.sqlite",
                 ("dashboard", "--port", str(port)): "cannot listen there",
                 ("dashboard", "--speed", "5000"): "--speed"}
        for args, says in cases.items():
            done = _cli(*args, env=env)
            assert done.returncode != 0 and says in done.stderr, (args, done.stderr)
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_script_reading_something_else_is_told_what_it_reached(tmp_path: Path) -> None:
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from controller.errors import MlfabricError

    with pytest.raises(MlfabricError, match="not a dashboard URL"):
        next_samples("ftp://127.0.0.1:8765/", 1)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SimpleHTTPRequestHandler,
                                                                     directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(MlfabricError, match=r"is not a dashboard's stream \(HTTP 404\)"):
            next_samples(f"http://127.0.0.1:{server.server_address[1]}/", 1)
    finally:
        server.shutdown()
        server.server_close()
