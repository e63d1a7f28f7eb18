"""Start and stop a switch process of either target attached to interfaces.

``python`` runs ``mlfabric-switch`` (the project's target), ``bmv2`` runs
``simple_switch_grpc``; both take the same flags, start without a program (``--no-p4``) and
are ready when their P4Runtime port accepts connections. With a log folder, each writes
everything it prints, its log at ``log_level`` included, to ``<log folder>/<name>.log`` (as the
p4lang tutorials' ``logs/s1.log``); with a pcap folder, ``<iface>_in.pcap`` and
``<iface>_out.pcap`` per port (BMv2's ``--pcap DIR``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from controller.errors import EmulationError, ToolchainMissing
from controller.netstate import NetRecord
from controller.readiness import free_tcp_port, wait_for_tcp

__all__ = ["ENGINES", "LOG_LEVELS", "TARGETS", "SwitchProcess", "SwitchSpec", "switch_command"]

log = logging.getLogger(__name__)

TARGETS = ("python", "bmv2")
CPU_PORT = 510
#: BMv2's ``--log-level`` values; ``info`` and quieter log no packet, ``debug`` and ``trace``
#: the Python target's packet engines (mlfabric-switch --engine)
ENGINES = ("auto", "native", "python")
#: log every packet (the log then grows with the traffic)
LOG_LEVELS = ("trace", "debug", "info", "warn", "error", "off")


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchSpec:
    """How to run one switch."""

    name: str
    target: str = "python"
    ports: Mapping[int, str]  # port number -> interface
    device_id: int = 1
    grpc_address: str = "127.0.0.1:9559"
    cpu_port: int | None = CPU_PORT
    log_dir: Path | None = None
    #: the log's level (``LOG_LEVELS``), used when there is a ``log_dir``
    log_level: str = "info"
    pcap_dir: Path | None = None
    #: BMv2's Thrift port (simple_switch_CLI); the Python target has no Thrift server
    thrift_port: int | None = None
    #: options of the switch itself (before ``--``), e.g. BMv2's ``--use-files 0``
    switch_args: tuple[str, ...] = ()
    #: a command the switch runs under, e.g. ``("stdbuf", "-oL")`` for a line-buffered log
    wrapper: tuple[str, ...] = ()
    #: the Python target's packet engine (``auto``, ``native``, ``python``); None: its default
    engine: str | None = None
    extra_args: tuple[str, ...] = ()


def _python_switch_executable() -> list[str]:
    exe = Path(sys.executable).with_name("mlfabric-switch")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "pybmv2.cli"]


def switch_command(spec: SwitchSpec) -> list[str]:
    """The command line that starts ``spec`` (simple_switch_grpc's syntax for both targets).

    >>> switch_command(SwitchSpec(name="s1", ports={1: "s1-eth1"}, grpc_address="127.0.0.1:50001"))[1:]
    ['--no-p4', '-i', '1@s1-eth1', '--device-id', '1', '--', '--grpc-server-addr', '127.0.0.1:50001', '--cpu-port', '510']
    >>> switch_command(SwitchSpec(name="s1", ports={}, engine="native"))[-2:]
    ['--engine', 'native']
    >>> switch_command(SwitchSpec(name="s1", ports={}, log_dir=Path("logs"), pcap_dir=Path("pcaps"),
    ...                           log_level="warn", thrift_port=9090))[1:7]
    ['--no-p4', '-L', 'warn', '--pcap', 'pcaps', '--device-id']
    """
    if spec.target not in TARGETS:
        raise EmulationError(f"unknown target {spec.target!r}: choose one of {TARGETS}")
    if spec.log_level not in LOG_LEVELS:
        raise EmulationError(f"unknown log level {spec.log_level!r}: choose one of {', '.join(LOG_LEVELS)}")
    if spec.engine is not None and spec.engine not in ENGINES:
        raise EmulationError(f"unknown engine {spec.engine!r}: choose one of {', '.join(ENGINES)}")
    if spec.engine is not None and spec.target != "python":
        raise EmulationError(f"--engine {spec.engine} is an option of the Python target, not of {spec.target}")
    if spec.target == "bmv2":
        exe = shutil.which("simple_switch_grpc")
        if exe is None:
            raise ToolchainMissing("simple_switch_grpc is not installed: use --target python")
        cmd = [*spec.wrapper, exe, "--no-p4"]
        if spec.log_dir is not None:  # its stdout is the log file (see SwitchProcess.launch)
            cmd += ["--log-console", "-L", spec.log_level]
        if spec.thrift_port is not None:
            cmd += ["--thrift-port", str(spec.thrift_port)]
    else:  # logs to stderr; no Thrift server, so no --thrift-port
        cmd = [*spec.wrapper, *_python_switch_executable(), "--no-p4"]
        if spec.log_dir is not None:
            cmd += ["-L", spec.log_level]
    for port, iface in sorted(spec.ports.items()):
        cmd += ["-i", f"{port}@{iface}"]
    if spec.pcap_dir is not None:
        cmd += ["--pcap", str(spec.pcap_dir)]
    cmd += list(spec.switch_args)
    cmd += ["--device-id", str(spec.device_id), "--", "--grpc-server-addr", spec.grpc_address]
    if spec.cpu_port is not None:
        cmd += ["--cpu-port", str(spec.cpu_port)]
    if spec.engine is not None:
        cmd += ["--engine", spec.engine]
    cmd += list(spec.extra_args)
    return cmd


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` owns a listening TCP socket on ``port`` (``/proc/net/tcp{,6}``
    names the socket's inode, ``/proc/PID/fd`` the process's sockets).

    >>> listens(os.getpid(), 1)
    False
    """
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    if not inodes:
        return False
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


class SwitchProcess:
    """A running switch; a context manager that always stops it."""

    def __init__(self, spec: SwitchSpec, record: NetRecord | None = None) -> None:
        self.spec = spec
        self._record = record
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None
        self._log_path: Path | None = None
        self._t0 = 0.0

    @property
    def grpc_address(self) -> str:
        return self.spec.grpc_address

    def start(self, *, timeout: float = 10.0) -> SwitchProcess:
        """Launch and wait until the P4Runtime server accepts connections."""
        self.launch()
        return self.wait_ready(timeout=timeout)

    def launch(self) -> SwitchProcess:
        """Start the process without waiting (start many, then :meth:`wait_ready` each)."""
        if self.spec.target == "bmv2" and self.spec.thrift_port is None:
            # a BMv2 built with Thrift serves it on 9090 unless told otherwise: a second
            # switch would find 9090 taken and fail to start, so each gets a free port
            self.spec = dataclasses.replace(self.spec, thrift_port=free_tcp_port())
        cmd = switch_command(self.spec)
        log_dir = self.spec.log_dir
        if self.spec.pcap_dir is not None:  # BMv2 refuses a --pcap folder that does not exist
            self.spec.pcap_dir.mkdir(parents=True, exist_ok=True)
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            self._log_path = log_dir / f"{self.spec.name}.log"
            out = open(self._log_path, "wb")  # noqa: SIM115 - handed to the child
        else:
            out = subprocess.DEVNULL  # type: ignore[assignment]
        t0 = time.monotonic()
        try:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise EmulationError(f"cannot start switch {self.spec.name}: {exc}") from exc
        finally:
            if log_dir is not None:
                out.close()
        if self._record is not None:
            self._record.add_pid(self.proc.pid, "--grpc-server-addr " + self.spec.grpc_address)
        self._t0 = t0
        return self

    def wait_ready(self, *, timeout: float = 10.0) -> SwitchProcess:
        def alive_and_listening() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise EmulationError(
                    f"switch {self.spec.name} exited with status {self.proc.returncode} "
                    f"during start-up{self._log_tail()}"
                )
            return True

        try:
            alive_and_listening()
            wait_for_tcp(self.spec.grpc_address, timeout=timeout,
                         what=f"switch {self.spec.name} P4Runtime server ({self.spec.target})")
            self._wait_own_listener(timeout, alive_and_listening)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - self._t0
        return self

    def _wait_own_listener(self, timeout: float, alive: Callable[[], bool]) -> None:
        """Until the port's listening socket is this process's own: another process answering
        on it (a port handed to two runs at once) is not this switch being ready."""
        port = int(self.spec.grpc_address.rsplit(":", 1)[1])
        deadline = time.monotonic() + timeout
        while True:
            alive()  # a switch that could not bind exits: say so, with its log
            if self.proc is None or listens(self.proc.pid, port):
                return
            if time.monotonic() > deadline:
                raise EmulationError(f"switch {self.spec.name}: port {port} answers, but not from this switch "
                                     f"(pid {self.proc.pid}): another process holds it")
            time.sleep(0.02)

    def _log_tail(self) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        lines = self._log_path.read_text(errors="replace").strip().splitlines()[-5:]
        return ("; last log lines:\n" + "\n".join(lines)) if lines else ""

    def terminate(self) -> None:
        """Ask the process to stop (SIGTERM) without waiting: a fabric's switches stop
        together, then :meth:`stop` waits for each."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, 15)

    def stop(self, *, timeout: float = 3.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, 15)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=timeout)
        except ProcessLookupError:
            pass

    def __enter__(self) -> SwitchProcess:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
