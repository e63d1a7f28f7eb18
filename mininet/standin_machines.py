"""Machines stood in for by network namespaces on this one, each with its own address and
its own SSH server: what the cluster tests run on, through the same code path as real
machines (every command reaches a stand-in over SSH, nothing bypasses it).

A stand-in ``PREFIX-mI`` is a network namespace joined to a bridge in the root namespace
(``PREFIX-br``, 10.231.N.254/24 for the first N no route of this machine covers; the stand-in
10.231.N.I+1) over a veth whose MTU leaves room
for GRETAP's overhead around 9,000-byte frames, running ``sshd`` (started by this module,
listening on its address only, root's login by a key made for the run). :meth:`StandIns.start`
writes the machines file and the ``ssh_config`` it names into the run's folder.

What stand-ins share, and real machines do not: the cores (each stand-in says it has all of
this machine's), the file system (the project checkout, logs and results), the process
table and the clock.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

from controller.errors import EmulationError
from controller.netstate import NetRecord

__all__ = ["SUBNETS", "UNDERLAY_MTU", "StandIns", "free_subnet"]

#: the /24s stand-ins take their addresses from: 10.231.N.0/24
SUBNETS = "10.231"
#: the stand-ins' underlay: 9,000-byte frames and GRETAP's 42 bytes, with room to spare
UNDERLAY_MTU = 9100
SSHD = "/usr/sbin/sshd"


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(list(argv), capture_output=True, text=True)
    if check and out.returncode:
        raise EmulationError(f"stand-in machines: {' '.join(argv)}: {out.stderr.strip() or out.stdout.strip()}")
    return out


def free_subnet() -> str:
    """The first ``10.231.N`` that no route of this machine's root namespace covers."""
    for n in range(256):
        prefix = f"{SUBNETS}.{n}"
        out = _run("ip", "route", "show", "match", f"{prefix}.1", check=False).stdout
        if not any(line.split()[0] != "default" for line in out.splitlines() if line.strip()):
            return prefix
    raise EmulationError(f"stand-in machines: every {SUBNETS}.N.0/24 is routed here already")


class StandIns:
    """``count`` stand-in machines for the ``with`` body (see the module docstring)."""

    def __init__(self, count: int, folder: Path, *, prefix: str = "mlfc") -> None:
        if not 1 <= count <= 16:
            raise EmulationError(f"stand-in machines: count must be 1..16, got {count}")
        if not prefix.isalnum() or len(prefix) > 6:
            raise EmulationError(f"stand-in machines: prefix must be 1-6 letters or digits, got {prefix!r}")
        self.count = count
        self.folder = Path(folder)
        self.prefix = prefix
        self.bridge = f"{prefix}-br"
        self.subnet = ""
        self._sshd: list[subprocess.Popen[bytes]] = []
        self._made: list[str] = []
        #: what a killed run leaves is found by `mlfabric clean-net` (controller.netstate)
        self._record: NetRecord | None = None

    def namespace(self, i: int) -> str:
        return f"{self.prefix}-m{i}"

    def address(self, i: int) -> str:
        return f"{self.subnet}.{i + 1}"

    @property
    def machines_file(self) -> Path:
        return self.folder / "machines.yaml"

    def __enter__(self) -> StandIns:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> StandIns:
        if not Path(SSHD).exists():
            raise EmulationError(f"stand-in machines need an SSH server: {SSHD} is missing (apt-get install "
                                 "openssh-server, or make setup)")
        if Path(f"/sys/class/net/{self.bridge}").exists():
            raise EmulationError(f"stand-in machines: {self.bridge} exists: are stand-ins with prefix "
                                 f"{self.prefix!r} running? (stop them, or pick another prefix)")
        self.folder.mkdir(parents=True, exist_ok=True)
        self._record = NetRecord(f"stand-ins-{self.prefix}").__enter__()
        self._record.add_link(self.bridge)
        self.subnet = free_subnet()
        key = self.folder / "id_ed25519"
        host_key = self.folder / "ssh_host_ed25519_key"
        for path in (key, host_key):
            if not path.exists():
                _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path))
        (self.folder / "authorized_keys").write_text(key.with_suffix(".pub").read_text())
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        self._made.append(self.bridge)
        _run("ip", "addr", "add", f"{self.subnet}.254/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "mtu", str(UNDERLAY_MTU), "up")
        lines = []
        for i in range(self.count):
            ns, addr, veth = self.namespace(i), self.address(i), f"{self.prefix}-m{i}"
            self._record.add_netns(ns)
            _run("ip", "netns", "add", ns)
            self._made.append(f"netns:{ns}")
            _run("ip", "link", "add", veth, "mtu", str(UNDERLAY_MTU), "type", "veth", "peer", "name", "eth0",
                 "mtu", str(UNDERLAY_MTU), "netns", ns)
            _run("ip", "link", "set", veth, "master", self.bridge, "up")
            _run("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "-n", ns, "route", "add", "default", "via", f"{self.subnet}.254")
            config = self.folder / f"sshd-{ns}.conf"
            config.write_text("\n".join([
                f"ListenAddress {addr}", "Port 22", f"HostKey {host_key}",
                f"AuthorizedKeysFile {self.folder / 'authorized_keys'}", "PermitRootLogin prohibit-password",
                "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
                f"PidFile {self.folder / f'sshd-{ns}.pid'}", "LogLevel ERROR", "AcceptEnv LANG",
                "Subsystem sftp internal-sftp", ""]))
            log = open(self.folder / f"sshd-{ns}.log", "ab")  # noqa: SIM115 (the server's for its life)
            self._sshd.append(subprocess.Popen(["ip", "netns", "exec", ns, SSHD, "-D", "-e", "-f", str(config)],
                                               stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                               start_new_session=True))
            log.close()
            self._record.add_pid(self._sshd[-1].pid, "sshd")
            lines.append(f"  - {{name: m{i}, ssh: root@{addr}, cores: {os.cpu_count() or 1}, python: {sys.executable}}}")
        for i in range(self.count):
            self._wait_sshd(i)
        (self.folder / "ssh_config").write_text("\n".join([
            f"Host {self.subnet}.*", f"  IdentityFile {key}", "  IdentitiesOnly yes", "  StrictHostKeyChecking no",
            "  UserKnownHostsFile /dev/null", "  LogLevel ERROR", "  ConnectTimeout 10", ""]))
        self.machines_file.write_text("# stand-in machines: network namespaces on one machine, each with sshd\n"
                                      "ssh_config: ssh_config\nmachines:\n" + "\n".join(lines) + "\n")
        return self

    def _wait_sshd(self, i: int, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self._sshd[i].poll() is not None:
                log = (self.folder / f"sshd-{self.namespace(i)}.log").read_text(errors="replace").strip()
                raise EmulationError(f"stand-in machine m{i}: sshd exited: {log[-300:]}")
            try:
                with socket.create_connection((self.address(i), 22), timeout=0.5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise EmulationError(f"stand-in machine m{i}: sshd not listening on {self.address(i)}:22 "
                                         f"after {timeout_s:g} s") from None
                time.sleep(0.05)

    def pids(self, i: int) -> list[int]:
        """Every process in stand-in ``i``'s namespace (its sshd and what runs under it)."""
        out = _run("ip", "netns", "pids", self.namespace(i), check=False)
        return [int(p) for p in out.stdout.split() if p.isdigit()]

    def stop(self) -> None:
        """Stop the SSH servers and whatever still runs in a stand-in, remove them."""
        for proc in self._sshd:
            if proc.poll() is None:
                with_group = proc.pid
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(with_group, signal.SIGTERM)
        for proc in self._sshd:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        self._sshd.clear()
        for item in reversed(self._made):
            if item.startswith("netns:"):
                ns = item.split(":", 1)[1]
                for pid in _run("ip", "netns", "pids", ns, check=False).stdout.split():
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), signal.SIGKILL)
                _run("ip", "netns", "del", ns, check=False)
            else:
                _run("ip", "link", "del", item, check=False)
        self._made.clear()
        if self._record is not None:
            self._record.cleanup()
            self._record = None


def main(argv: list[str] | None = None) -> int:
    """``mlfabric cluster stand-ins N``: run until interrupted (or ``--for``), then remove them."""
    import argparse

    from controller.experiments.results import new_results_dir
    from mlfabric_base.numbers import nonnegative_float, positive_int

    p = argparse.ArgumentParser(prog="mlfabric cluster stand-ins")
    p.add_argument("count", type=positive_int)
    p.add_argument("--folder", type=Path, default=None)
    p.add_argument("--prefix", default="mlfc")
    p.add_argument("--for", dest="duration", type=nonnegative_float, default=None)  # never NaN or infinite
    a = p.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    folder = a.folder or new_results_dir("stand-ins")
    try:
        with StandIns(a.count, folder, prefix=a.prefix) as s:
            print(f"{a.count} stand-in machines up ({', '.join(s.address(i) for i in range(a.count))}); "
                  f"machines file: {s.machines_file}", flush=True)
            print("use it: mlfabric fabric up TOPOLOGY --cluster FILE; Ctrl-C stops them", flush=True)
            stop.wait(a.duration)
    except EmulationError as exc:
        print(f"mlfabric: error: {exc}", file=sys.stderr)
        return 1
    print("stand-in machines removed", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
