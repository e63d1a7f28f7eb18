"""Run a Checkmate job inside an emulated fabric: its workers, its shadow, its iterations.

Shared by the experiment runner (``checkmate_experiment.py``) and the emulation tests.
Every process it starts is stopped when its ``with`` block ends, whatever happened.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from controller.errors import EmulationError
from controller.mirror import MirrorProgram
from workloads.checkmate.training import TrainingConfig
from workloads.config import CLUSTER_TCP_CONGESTION
from workloads.driver import WorkerGroup
from workloads.plan import Rank

__all__ = ["CheckmateJob", "ShadowProcess", "read_events", "train_iteration"]


def read_events(path: Path) -> list[dict[str, Any]]:
    """The shadow's events so far (a partial last line is skipped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


class ShadowProcess:
    """The shadow of a job, running in its host; stopped with SIGTERM (then SIGKILL)."""

    def __init__(self, host: Any, config: Path, report: Path, *, join: bool = False,
                 drop_rate: float = 0.0, drop_seed: int = 0, drop_every: int = 0,
                 log: Path | None = None, niceness: int = 0) -> None:
        argv = [sys.executable, "-m", "workloads.checkmate.shadow", "--config", str(config),
                "--report", str(report)]
        if niceness:  # the paper's shadow is a CPU cluster of its own: it takes only idle cores
            argv = ["nice", "-n", str(niceness), *argv]
        if join:
            argv.append("--join")
        if drop_rate:
            argv += ["--drop-rate", str(drop_rate), "--drop-seed", str(drop_seed)]
        if drop_every:
            argv += ["--drop-every", str(drop_every)]
        self.report = report
        self._log = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed in stop()
        self.proc = host.popen(argv, stdout=subprocess.PIPE, stderr=self._log)

    def wait_ready(self, timeout_s: float = 20.0) -> ShadowProcess:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            if self.proc.poll() is not None:
                raise EmulationError(f"the shadow exited with {self.proc.returncode} before it was ready "
                                     "(see its log)")
            if not select.select([self.proc.stdout], [], [], min(left, 0.2))[0]:
                continue  # never block past the deadline on a shadow that prints nothing
            line = self.proc.stdout.readline()
            if line.strip() == b"READY":
                return self
        raise EmulationError(f"the shadow was not ready within {timeout_s:g} s")

    def events(self) -> list[dict[str, Any]]:
        return read_events(self.report)

    def wait_applied(self, iteration: int, timeout_s: float = 20.0) -> bool:
        """Wait until the shadow has applied (or resynced to) ``iteration`` or later."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(e["event"] in ("applied", "resync") and e["iteration"] >= iteration for e in self.events()):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self._log is not subprocess.DEVNULL:
            self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=5)


@dataclasses.dataclass
class CheckmateJob:
    """A compiled job on a running fabric (``fab``: an EmulatedFabric)."""

    fab: Any
    program: MirrorProgram
    workdir: Path
    worker_timeout_s: float = 15.0
    state_port_offset: int = 999

    @property
    def ranks(self) -> list[Rank]:
        return list(self.program.job.layout.ranks)

    @property
    def state_port(self) -> int:
        return self.program.job.spec.port + self.state_port_offset

    def training(self, **overrides: Any) -> TrainingConfig:
        spec = self.program.job.spec
        base = TrainingConfig(ring=spec.ring, session=spec.session, mirror_port=spec.port + spec.world,
                              state_port=self.state_port)
        return dataclasses.replace(base, **overrides)

    def _host_of(self, rank: Rank) -> Any:
        return self.fab.host(self.program.job.servers[rank.server])

    @contextlib.contextmanager
    def workers(self, name: str = "workers") -> Iterator[WorkerGroup]:
        spec, layout = self.program.job.spec, self.program.job.layout
        config = {"ranks": [dataclasses.asdict(r) for r in layout.ranks], "servers": layout.servers,
                  "rails": layout.rails, "port": spec.port, "timeout_s": self.worker_timeout_s,
                  "mesh": "rail", "tcp_congestion": CLUSTER_TCP_CONGESTION}
        path = self.workdir / f"{name}.json"
        path.write_text(json.dumps(config))

        def popen(rank: Rank, argv: list[str]) -> subprocess.Popen:
            return self._host_of(rank).popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE)

        with WorkerGroup(popen, path, layout.ranks, python=sys.executable) as group:
            yield group

    def shadow_config(self, training: TrainingConfig, *, checkpoint_every: int = 1,
                      hole_timeout_s: float = 1.0) -> Path:
        layout, topo = self.program.job.layout, self.program.job.topology
        shadow = self.program.job.spec.shadow
        ifaces = sorted({f"{shadow}-{lg.shadow_nic}" for lg in self.program.legs})
        data = {"training": dataclasses.replace(training, restore="").to_dict(),
                "ranks": [dataclasses.asdict(r) for r in layout.ranks], "servers": layout.servers,
                "rails": layout.rails, "interfaces": ifaces,
                "state_server": f"{layout[0].ip}:{training.state_port}",
                "checkpoint_dir": str(self.shadow_dir), "checkpoint_every": checkpoint_every,
                "hole_timeout_s": hole_timeout_s}
        assert topo.host(shadow)
        path = self.workdir / "shadow.json"
        path.write_text(json.dumps(data))
        return path

    @property
    def shadow_dir(self) -> Path:
        path = self.workdir / "shadow"
        path.mkdir(exist_ok=True)
        return path

    @contextlib.contextmanager
    def shadow(self, training: TrainingConfig, *, join: bool = False, drop_rate: float = 0.0,
               drop_seed: int = 0, drop_every: int = 0, checkpoint_every: int = 1,
               report: Path | None = None, niceness: int = 0) -> Iterator[ShadowProcess]:
        config = self.shadow_config(training, checkpoint_every=checkpoint_every)
        proc = ShadowProcess(self.fab.host(self.program.job.spec.shadow), config,
                             report or self.workdir / "shadow-events.jsonl", join=join,
                             drop_rate=drop_rate, drop_seed=drop_seed, drop_every=drop_every,
                             log=self.workdir / "shadow.log", niceness=niceness)
        try:
            yield proc.wait_ready()
        finally:
            proc.stop()


def train_iteration(group: WorkerGroup, training: TrainingConfig, iteration: int,
                    timeout_s: float = 60.0) -> dict[str, Any]:
    """One iteration on every rank: a row with the slowest rank's time, the global loss, and
    the parameter digest if every rank agrees on it (else ``digest_mismatch``)."""
    results = group.run({"op": "ckpt_train", "iter": iteration, "training": training.to_dict()},
                        timeout=timeout_s)
    ok = all(r["ok"] for r in results)
    digests = {r.get("digest") for r in results}
    row: dict[str, Any] = {"iteration": iteration, "ok": ok,
                           "error": "; ".join(sorted({r["error"] for r in results if r.get("error")}))[:300]}
    if ok:
        row.update(seconds=max(r["seconds"] for r in results), loss=sum(r["loss"] for r in results),
                   digest=results[0]["digest"] if len(digests) == 1 else "",
                   digest_mismatch=len(digests) != 1,
                   checkpoint_s=max(r["phases"].get("checkpoint", 0.0) for r in results),
                   allreduce_s=max(r["phases"].get("allreduce", 0.0) for r in results),
                   compute_s=max(r["phases"].get("compute", 0.0) for r in results),
                   checkpoint_wait_s=max(r["phases"].get("checkpoint_wait", 0.0) for r in results),
                   persisted=max((r["persisted"] for r in results if "persisted" in r), default=""))
    return row
