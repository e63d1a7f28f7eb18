"""One machine's part of a fabric spread over several: ``python -m mlfabric_emulation.machine_part``,
started over SSH by :mod:`cluster_fabric` on every machine.

It reads its plan (one JSON line: the whole topology, the nodes this machine runs, its tunnel
ends, the switches' options), builds its part with the same code as a fabric on one machine
(:class:`~fabric_net.EmulatedFabric` with ``only`` and ``tunnels``), answers one ``ready``
line, then serves requests, one JSON line each, until its input ends: a command in a host,
stopping a switch, the CPU and link monitors over an interval, the workers of its GPUs. When
its input ends (the coordinator finished, or its SSH connection died) or on SIGTERM, SIGHUP
or SIGINT, it tears its part down: nothing stays on the machine.

Its standard output is the protocol's alone: everything else it or Mininet prints goes to
standard error (the coordinator's log of this machine).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any

from mlfabric_emulation.cpu_sampler import CpuSampler, fabric_cpu_sampler
from mlfabric_emulation.fabric_net import EmulatedFabric

from controller.cluster.tunnels import TunnelEnd
from controller.errors import MlfabricError
from controller.topology.loader import parse_topology
from workloads.driver import WorkerGroup
from workloads.forked import ForkingFactory
from workloads.plan import Rank

__all__ = ["main"]

log = logging.getLogger("mlfabric.machine")


class _Stop(Exception):
    """A signal asked the part to stop."""


def _on_signal(signum: int, _frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


class MachinePart:
    """The running part and what the coordinator may ask of it."""

    def __init__(self, plan: dict[str, Any]) -> None:
        topo = parse_topology(plan["topology"], "<plan>")
        self.topo = topo
        self.nodes = frozenset(plan["nodes"])
        opts = plan.get("options", {})
        self.fabric = EmulatedFabric(
            topo, target=opts.get("target", "python"), engine=opts.get("engine"),
            shape=opts.get("shape", True), source_routing=opts.get("source_routing", False),
            super_frames=opts.get("super_frames", 0), frame_skbs=opts.get("frame_skbs", False),
            log_dir=Path(opts["log_dir"]) if opts.get("log_dir") else None, log_level=opts.get("log_level", "info"),
            pcap_dir=Path(opts["pcap_dir"]) if opts.get("pcap_dir") else None,
            switch_args=tuple(opts.get("switch_args", ())), install=False, publish=False, record_journal=False,
            only=self.nodes, tunnels=[TunnelEnd(**t) for t in plan.get("tunnels", [])],
            grpc_host=plan["grpc_host"])
        self._measure: list[Any] = []
        self._workers: contextlib.ExitStack | None = None
        self._group: WorkerGroup | None = None

    def start(self) -> dict[str, Any]:
        self.fabric.start()
        live = self.fabric.live
        assert live is not None
        return {"pid": os.getpid(), "grpc": {s.name: s.grpc for s in live.switches if s.name in self.nodes},
                "host_pids": live.params["host_pids"], "switch_pids": self.fabric.switch_pids(),
                "timings": dataclasses.asdict(self.fabric.timings)}

    def stop(self) -> None:
        try:
            self.workers_close()
        finally:
            self.fabric.stop()

    # -- requests ------------------------------------------------------------------------

    def host_cmd(self, host: str, cmd: str) -> str:
        return self.fabric.host(host).cmd(cmd)

    def tunnel_bytes(self) -> int:
        """Bytes this machine's tunnel ends have sent so far (each crossing link's two ends
        together count both its directions)."""
        total = 0
        for intf in self.fabric.tunnel_intfs:
            out = intf.cmd(f"cat /sys/class/net/{intf.name}/statistics/tx_bytes 2>/dev/null || "
                           f"ip -s -o link show dev {intf.name}")
            total += _tx_bytes(intf.name, out)
        return total

    def wait_file(self, path: str, timeout_s: float) -> bool:
        """Whether ``path`` exists on this machine within ``timeout_s`` (polled every 5 ms: a
        job's rank on this machine hand-shakes through files, as the collectives experiment's)."""
        deadline = time.monotonic() + timeout_s
        while not os.path.exists(path):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def read_text(self, path: str) -> str:
        try:
            return Path(path).read_text()
        except OSError as exc:
            raise MlfabricError(f"cannot read {path}: {exc.strerror or exc}") from None

    def touch(self, path: str) -> None:
        Path(path).touch()

    def make_dirs(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)

    def stop_switch(self, name: str) -> None:
        self.fabric.switch_process(name).stop()

    def measure_begin(self) -> None:
        names = [s.name for s in self.topo.switches if s.name in self.nodes]
        samplers = [fabric_cpu_sampler(self.fabric, names)]
        if self._group is not None:
            samplers.append(CpuSampler(self._group.pids))
        stack = contextlib.ExitStack()
        self._measure = [stack, [stack.enter_context(s.measure()) for s in samplers]]

    def measure_end(self) -> dict[str, Any]:
        if not self._measure:
            raise MlfabricError("measure_end without measure_begin")
        stack, uses = self._measure
        stack.close()
        self._measure = []
        out = {"fabric": dataclasses.asdict(uses[0][0])}
        if len(uses) > 1:
            out["workers"] = dataclasses.asdict(uses[1][0])
        return out

    def workers_start(self, config: dict[str, Any], ranks: list[dict[str, Any]], config_path: str,
                      nice: int = 19) -> dict[str, int]:
        self.workers_close()
        path = Path(config_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config))
        mine = [Rank(**r) for r in ranks]
        hosts = self.topo.hosts

        def netns_of(server: int) -> str:
            return f"/proc/{self.fabric.host(hosts[server].name).pid}/ns/net"

        stack = contextlib.ExitStack()
        try:
            factory = stack.enter_context(ForkingFactory(mine, netns_of=netns_of, python=sys.executable, nice=nice))
            self._group = stack.enter_context(WorkerGroup(factory, path, mine, python=sys.executable))
        except BaseException:
            stack.close()
            self._group = None
            raise
        self._workers = stack
        return self._group.pids()

    def workers_run(self, command: dict[str, Any], timeout: float | None = None) -> list[dict[str, Any]]:
        if self._group is None:
            raise MlfabricError("no workers run on this machine (workers_start first)")
        return self._group.run(command, timeout=timeout)

    def workers_close(self) -> None:
        if self._workers is not None:
            stack, self._workers, self._group = self._workers, None, None
            stack.close()


def _tx_bytes(name: str, out: str) -> int:
    """A counter read (``tx_bytes``), or the TX bytes of ``ip -s -o link``'s one line.

    >>> _tx_bytes("e0", "1234\\n")
    1234
    >>> _tx_bytes("e0", "5: e0: <UP> mtu 9000\\    RX: bytes ...\\    10 1 0 0 0 0 \\    TX: bytes  packets "
    ...                 "errors dropped carrier collsns \\    777 3 0 0 0 0")
    777
    """
    text = out.strip()
    if text.isdigit():
        return int(text)
    if "TX:" in text:
        numbers = text.split("TX:", 1)[1].split("\\")
        if len(numbers) > 1 and numbers[1].split():
            return int(numbers[1].split()[0])
    raise MlfabricError(f"cannot read the bytes {name} sent: {text[:200]!r}")


def _reply(out: IO[str], message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def serve(part: MachinePart, requests: IO[str], out: IO[str]) -> None:
    """Answer requests until the input ends."""
    handlers = {"host_cmd": part.host_cmd, "stop_switch": part.stop_switch, "tunnel_bytes": part.tunnel_bytes,
                "wait_file": part.wait_file, "read_text": part.read_text, "touch": part.touch,
                "make_dirs": part.make_dirs, "measure_begin": part.measure_begin,
                "measure_end": part.measure_end, "workers_start": part.workers_start,
                "workers_run": part.workers_run, "workers_close": part.workers_close}
    for line in requests:
        if not line.strip():
            continue
        req = json.loads(line)
        handler = handlers.get(req.get("op"))
        try:
            if handler is None:
                raise MlfabricError(f"unknown request {req.get('op')!r} (known: {', '.join(sorted(handlers))})")
            result = handler(**req.get("args", {}))
            _reply(out, {"id": req.get("id"), "result": result})
        except MlfabricError as exc:
            _reply(out, {"id": req.get("id"), "error": str(exc)})


def main() -> int:
    # the protocol's stream is a copy of standard output; fd 1 itself goes to standard error
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _on_signal)
    part: MachinePart | None = None
    try:
        plan = json.loads(sys.stdin.readline() or "{}")
        if not plan:
            return 0
        part = MachinePart(plan)
        _reply(out, {"ready": part.start()})
        serve(part, sys.stdin, out)
    except _Stop as stop:
        log.warning("stopping on %s", stop)
    except MlfabricError as exc:
        _reply(out, {"error": str(exc)})
    except Exception as exc:  # the coordinator prints it: a traceback would be lost on another machine
        log.exception("machine part failed")
        _reply(out, {"error": f"{type(exc).__name__}: {exc}"})
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)  # teardown is not interrupted
        if part is not None:
            part.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
