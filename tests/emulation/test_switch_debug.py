"""Looking into a running fabric's switches as the p4lang tutorials do: ``fabric up --pcap``
writes per-port pcaps and per-switch logs into the run folder, ``mlfabric shell`` opens
p4runtime-shell on a switch without taking it from the controller, and on BMv2 every switch
has its own Thrift port for simple_switch_CLI (``mlfabric bmv2-cli``)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fabric_process import wait_until_published
from scapy.all import ICMP, IP, rdpcap

from controller.bmv2_thrift import thrift_support
from controller.cli.switch_args import current_fabric_path
from controller.topology import dump_topology, rail_only

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


@contextmanager
def fabric_up(tmp_path: Path, target: str, *options: str) -> Iterator[tuple[subprocess.Popen, Path]]:
    """``fabric up`` of a 2-server, 2-rail fabric until the block ends; then SIGTERM, and its
    output is checked for a clean teardown."""
    topo_file = tmp_path / "rail-2x2.yaml"
    dump_topology(rail_only(2, 2, rate_mbps=None), topo_file)
    run_dir = tmp_path / "run"
    published = current_fabric_path()
    assert not published.exists(), "another emulated fabric is running"
    proc = subprocess.Popen([sys.executable, "-m", "controller.cli", "fabric", "up", str(topo_file), "--target", target,
                             "--run-dir", str(run_dir), "--for", "300", *options],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_published(proc, published, timeout=60)
        yield proc, run_dir
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "torn down" in out, out
    assert not published.exists()
    proc.output = out  # type: ignore[attr-defined]


def icmp_in(path: Path) -> list[tuple[str, str, int]]:
    """(source, destination, ICMP type) of every ICMP frame in a pcap; BMv2 leaves a port's
    pcap empty, without even a header, when no frame went through it."""
    if path.stat().st_size == 0:
        return []
    return [(p[IP].src, p[IP].dst, p[ICMP].type) for p in rdpcap(str(path)) if ICMP in p]


TOPO = rail_only(2, 2, rate_mbps=None)
SRC, DST = TOPO.hosts[0].nics[0].address, TOPO.hosts[1].nics[0].address  # both on rail 0


def test_pcaps_hold_a_ping_and_every_switch_logs_it(target_name: str, tmp_path: Path) -> None:
    topo, src, dst = TOPO, SRC, DST
    with fabric_up(tmp_path, target_name, "--pcap", "--log-level", "debug") as (proc, run_dir):
        status = cli("fabric", "status", "--json")
        ping = cli("host", "exec", topo.hosts[0].name, "--", "ping", "-c1", "-W2", dst)
    assert ping.returncode == 0 and "1 received" in ping.stdout, ping.stdout + ping.stderr
    state = json.loads(status.stdout)
    assert (state["target"], state["run_dir"], state["pcap_dir"], state["log_dir"]) == (
        target_name, str(run_dir), str(run_dir / "pcaps"), str(run_dir / "logs"))
    out = proc.output  # type: ignore[attr-defined]
    assert f"run folder {run_dir}: logs/SWITCH.log" in out and "pcaps/SWITCH-ethN_in.pcap" in out, out

    ports = {f"{lk.end(sw.name).node}-eth{lk.end(sw.name).port}" for sw in topo.switches
             for lk in topo.links_of(sw.name)}
    assert {p.name for p in (run_dir / "pcaps").iterdir()} == {
        f"{port}_{d}.pcap" for port in ports for d in ("in", "out")}, "BMv2's names: IFACE_in.pcap, IFACE_out.pcap"
    seen = {p.name: icmp_in(p) for p in (run_dir / "pcaps").iterdir()}
    request, reply = (src, dst, 8), (dst, src, 0)
    for frame in (request, reply):
        assert [n for n, f in seen.items() if frame in f and n.endswith("_in.pcap")], (frame, seen)
        assert [n for n, f in seen.items() if frame in f and n.endswith("_out.pcap")], (frame, seen)
    assert all(n.startswith("rail0-") for n, f in seen.items() if f), "the ping crossed rail 0 only"
    for sw in topo.switches:
        assert (run_dir / "logs" / f"{sw.name}.log").stat().st_size > 0
    assert "Processing packet received on port" in (run_dir / "logs" / "rail0.log").read_text(), \
        "--log-level debug logs every packet"


def test_the_shell_reads_the_switch_and_leaves_the_controller_in_charge(target_name: str, tmp_path: Path) -> None:
    route = "10.9.0.0/16"
    count = 'print("ENTRIES", len(list(table_entry["RailIngress.ipv4_lpm"].read())))\n'
    with fabric_up(tmp_path, target_name) as (_, run_dir):
        ping = cli("host", "exec", TOPO.hosts[0].name, "--", "ping", "-c1", "-W2", DST)
        rules = json.loads(cli("rules", "show", "rail0", "--json").stdout)
        read = cli("shell", "rail0", stdin=f"print('TABLES', sorted(t.preamble.name for t in p4info.tables))\n{count}")
        # a shell left open (primary while no controller is connected) ...
        shell = subprocess.Popen([sys.executable, "-m", "controller.cli", "shell", "rail0"], cwd=REPO, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            assert shell.stdin is not None and shell.stdout is not None
            shell.stdin.write('print("READY", flush=True)\n')
            shell.stdin.flush()
            lines = []
            for line in shell.stdout:  # ends at EOF if the shell dies
                lines.append(line)
                if "READY" in line:
                    break
            assert any("READY" in line for line in lines), "".join(lines)
            # ... gives way to the controller, whose election id is higher
            add = cli("rules", "add", "rail0", "ipv4_lpm", f"dst_addr={route}", "drop")
            during = cli("rules", "show", "rail0", "ipv4_lpm", "--json")
            shell.stdin.write(count)
            shell.stdin.close()
            rest = shell.stdout.read()
            shell.wait(timeout=30)
        finally:
            if shell.poll() is None:
                shell.kill()
                shell.wait()
        after = cli("rules", "delete", "rail0", "ipv4_lpm", f"dst_addr={route}")
        final = json.loads(cli("rules", "show", "rail0", "--json").stdout)
        thrift = cli("bmv2-cli", "rail0")
    assert ping.returncode == 0, ping.stdout + ping.stderr
    for sw in TOPO.switches:  # the default level: start-up, no packet
        log = (run_dir / "logs" / f"{sw.name}.log").read_text()
        assert log and "Processing packet" not in log, log
    assert not (run_dir / "pcaps").exists(), "no pcaps without --pcap"
    assert read.returncode == 0, read.stdout + read.stderr
    n = len(rules["RailIngress.ipv4_lpm"]["entries"])
    assert f"ENTRIES {n}" in read.stdout and "RailIngress.ipv4_lpm" in read.stdout, read.stdout
    # one line of ours; gRPC core's own log lines (E1128 08:15:18.82 ... thd.cc:157] ...) are the
    # library's: one make test run had its thread pool retry a pthread_create refused with EAGAIN
    ours = [line for line in read.stderr.splitlines() if not re.match(r"[EWI]\d{4} \d\d:\d\d:", line)]
    assert "pipeline untouched" in read.stderr and len(ours) == 1, read.stderr
    assert add.returncode == 0, add.stdout + add.stderr
    assert len(json.loads(during.stdout)["RailIngress.ipv4_lpm"]["entries"]) == n + 1
    assert f"ENTRIES {n + 1}" in rest, rest
    assert shell.returncode == 0
    assert after.returncode == 0, after.stdout + after.stderr
    assert final == rules, "the controller still writes after the shell exits"
    if target_name == "python":
        assert thrift.returncode == 1 and "the Python target has no Thrift server" in thrift.stderr
        assert thrift.stderr.count("\n") == 1


def test_bmv2_switches_get_their_own_thrift_port(target_name: str, tmp_path: Path) -> None:
    if target_name != "bmv2":
        pytest.skip("Thrift ports are BMv2's (--target bmv2); the Python target has none")
    with fabric_up(tmp_path, target_name) as (proc, _):
        status = json.loads(cli("fabric", "status", "--json").stdout)
        text = cli("fabric", "status").stdout
        show_ports = cli("bmv2-cli", "rail0", stdin="show_ports\n")
    ports = status["thrift_ports"]
    assert sorted(ports) == ["rail0", "rail1"] and len(set(ports.values())) == 2 and min(ports.values()) >= 9090
    assert all(str(p) in text for p in ports.values())
    out = proc.output  # type: ignore[attr-defined]
    assert all(f"{name}  " in out and f"  {port}" in out for name, port in ports.items()), out
    served, reason = thrift_support()
    if not served:
        assert show_ports.returncode == 1 and "built without Thrift" in show_ports.stderr, show_ports.stderr
        pytest.skip(f"simple_switch_CLI cannot reach the switches: {reason}")
    assert show_ports.returncode == 0, show_ports.stdout + show_ports.stderr
    assert "rail0-eth1" in show_ports.stdout, show_ports.stdout
