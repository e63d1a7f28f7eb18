"""The shadow: a passive replica that trains from the mirrored gradient alone.

Run inside the shadow host's network namespace::

    python -m workloads.checkmate.shadow --config SHADOW_JSON --report EVENTS_JSONL [--join]

It captures the mirrored copies on its NICs (:mod:`workloads.checkmate.capture`),
reassembles each mirrored TCP stream (:mod:`workloads.checkmate.reassembly`), rebuilds every
iteration's reduced gradient (:mod:`workloads.checkmate.replica`) and applies the workers'
optimizer step to it, with the same code, so its parameters stay bit-identical. It writes a
checkpoint every k iterations, atomically. An iteration whose data has a hole is never
applied: it is reported, and the shadow pulls the state of a later iteration from rank 0's
side channel (:mod:`workloads.checkmate.state_channel`) and goes on from there. ``--join``
starts a shadow mid-training (a restart): it syncs first, then replicates.

Events (one JSON object a line in the report): ``ready``, ``applied`` (iteration, digest),
``checkpoint``, ``hole`` (iteration), ``resync`` (iteration, digest, reason), ``stream``
(a mirrored connection seen), ``gap``, ``stopped`` (counters). It prints ``READY`` on
stdout once its sockets are open, and stops on SIGTERM, SIGINT or SIGHUP.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import random
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from mlfabric_base.numbers import unit_fraction
from workloads.checkmate.capture import Capture, Segment
from workloads.checkmate.capture_plan import CaptureLeg, capture_plan
from workloads.checkmate.checkpoint import load_checkpoint, save_checkpoint
from workloads.checkmate.model import init_params, param_digest
from workloads.checkmate.optim import Optimizer
from workloads.checkmate.reassembly import FrameStream, Gap
from workloads.checkmate.replica import GradientAssembler
from workloads.checkmate.state_channel import fetch_state
from workloads.checkmate.tagging import session_of
from workloads.checkmate.training import TrainingConfig
from workloads.config import WorkloadConfig
from workloads.errors import ConfigError, TransportError, WorkloadError
from workloads.plan import Layout, ring_plan

__all__ = ["SHADOW_CHECKPOINT", "ShadowConfig", "ShadowReplica", "build_parser", "main"]

log = logging.getLogger(__name__)

SHADOW_CHECKPOINT = "shadow-latest.npz"


class _RetryLater(Exception):
    """The side channel did not answer: try the resync again on the next round."""


@dataclass(frozen=True, kw_only=True)
class ShadowConfig:
    """What the shadow needs: the job (training + ranks), where to capture and to write."""

    training: TrainingConfig
    layout: Layout
    interfaces: tuple[str, ...]
    state_server: tuple[str, int] | None
    source_ip: str | None
    checkpoint_dir: str
    checkpoint_every: int = 1
    hole_timeout_s: float = 1.0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<shadow>") -> ShadowConfig:
        known = {"training", "ranks", "servers", "rails", "interfaces", "state_server", "source_ip",
                 "checkpoint_dir", "checkpoint_every", "hole_timeout_s"}
        for key in data:
            if key not in known:
                raise ConfigError(source, key, data[key], "unknown key")
        for key in ("training", "ranks", "servers", "rails", "interfaces", "checkpoint_dir"):
            if key not in data:
                raise ConfigError(source, key, None, "missing")
        layout = WorkloadConfig.from_dict({k: data[k] for k in ("ranks", "servers", "rails")}, source).layout
        ifaces = data["interfaces"]
        if not isinstance(ifaces, list) or not ifaces or not all(isinstance(i, str) for i in ifaces):
            raise ConfigError(source, "interfaces", ifaces, "must be a non-empty list of interface names")
        server = data.get("state_server")
        address = None
        if server is not None:
            host, _, port = str(server).rpartition(":")
            if not host or not port.isdigit():
                raise ConfigError(source, "state_server", server, "must be HOST:PORT")
            address = (host, int(port))
        every = data.get("checkpoint_every", 1)
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ConfigError(source, "checkpoint_every", every, "must be an integer >= 1")
        hole = data.get("hole_timeout_s", 1.0)
        if isinstance(hole, bool) or not isinstance(hole, int | float) or hole <= 0:
            raise ConfigError(source, "hole_timeout_s", hole, "must be a number of seconds > 0")
        return cls(training=TrainingConfig.from_dict(data["training"], f"{source}: training"),
                   layout=layout, interfaces=tuple(ifaces), state_server=address,
                   source_ip=data.get("source_ip"), checkpoint_dir=str(data["checkpoint_dir"]),
                   checkpoint_every=every, hole_timeout_s=float(hole))

    @classmethod
    def load(cls, path: str | Path) -> ShadowConfig:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(str(path), "<file>", str(path), f"cannot read: {exc}") from exc
        return cls.from_dict(data, str(path))


class ShadowReplica:
    """Streams, assembler and model state of one shadow; :meth:`on_segment` and
    :meth:`advance` are its whole life, fed by :func:`run` (or by a test)."""

    def __init__(self, cfg: ShadowConfig, report: TextIO, *, join: bool = False) -> None:
        self.cfg, self.report = cfg, report
        tc = cfg.training
        self.plan = capture_plan(cfg.layout, ring_plan(cfg.layout, tc.ring))
        self.params = init_params(tc.model)
        self.optimizer = Optimizer(tc.optimizer, self.params.size)
        self.applied = -1
        if tc.restore:
            ck = load_checkpoint(Path(tc.restore))
            self.params, self.applied = ck.params.copy(), ck.iteration
            self.optimizer.load_state(ck.optimizer_state)
        self.assembler = GradientAssembler(self.plan, self.params.size)
        lay = cfg.layout
        self.legs: dict[tuple[str, str, int], CaptureLeg] = {
            (lay[leg.sender].ip, lay[leg.receiver].ip, tc.mirror_port + leg.receiver): leg
            for leg in self.plan.legs}
        self.streams: dict[tuple[str, str, int, int], tuple[CaptureLeg, FrameStream]] = {}
        self.need_sync = "join" if join else ""
        self.gap_pending = False  # a stream lost frames: the next incomplete iteration is a hole
        self.progress: dict[int, float] = {}  # iteration -> when its last chunk arrived
        self.counters = {"segments": 0, "wire_bytes": 0, "frames": 0, "gaps": 0, "holes": 0,
                         "resyncs": 0, "applied": 0, "ignored": 0}

    def emit(self, event: str, **fields: Any) -> None:
        self.report.write(json.dumps({"event": event, "t": time.time(), **fields}) + "\n")
        self.report.flush()

    # ------------------------------------------------------------ input

    def on_segment(self, seg: Segment, now: float) -> None:
        session = session_of(seg.tos)
        if session is None:
            return  # untagged: the shadow's own traffic (its side channel), not a copy
        leg = self.legs.get((seg.src, seg.dst, seg.dport)) if session == self.cfg.training.session else None
        if leg is None:
            self.counters["ignored"] += 1  # a copy, but of another job or flow: crosstalk
            return
        self.counters["segments"] += 1
        self.counters["wire_bytes"] += seg.wire_bytes
        key = (seg.src, seg.dst, seg.sport, seg.dport)
        if key not in self.streams:
            for old in [k for k, (lg, _) in self.streams.items() if lg == leg]:
                del self.streams[old]  # the leg was re-opened (workers restarted)
            stream = FrameStream(plausible=functools.partial(self.assembler.plausible, leg),
                                 lengths=self.assembler.lengths(leg),
                                 hole_timeout_s=self.cfg.hole_timeout_s)
            self.streams[key] = (leg, stream)
            self.emit("stream", sender=leg.sender, receiver=leg.receiver, sport=seg.sport, syn=seg.syn)
        self.streams[key][1].add(seg.seq, seg.payload, syn=seg.syn, now=now)

    # ------------------------------------------------------------ progress

    def advance(self, now: float) -> None:
        """Take what the streams completed, apply every complete iteration in order, and
        resync past an iteration that can never complete."""
        for leg, stream in self.streams.values():
            for item in stream.poll(now):
                if isinstance(item, Gap):
                    self.counters["gaps"] += 1
                    self.gap_pending = True
                    self.emit("gap", sender=leg.sender, receiver=leg.receiver,
                              start=item.start, end=item.end)
                    continue
                self.counters["frames"] += 1
                iteration = self.assembler.add(leg, item.tag, item.payload)
                if iteration is not None:
                    self.progress[iteration] = now
                if iteration is not None and iteration <= self.applied:
                    self.assembler.drop_through(self.applied)
        try:
            while True:
                nxt = self.applied + 1
                if self.need_sync:
                    self._resync(self.need_sync)
                elif self.assembler.complete(nxt):
                    self._apply(nxt)
                elif self.assembler.stalled(nxt) or self.gap_pending or self._quiet(nxt, now):
                    self._resync(f"hole in iteration {nxt}", hole=nxt)
                else:
                    return
        except _RetryLater:
            return

    def _quiet(self, iteration: int, now: float) -> bool:
        """Part of ``iteration`` arrived, then nothing more for a while: the rest was lost
        with nothing after it to show the gap (the last iteration of a run)."""
        last = self.progress.get(iteration)
        return last is not None and now - last > 3 * self.cfg.hole_timeout_s

    def _apply(self, iteration: int) -> None:
        grad = self.assembler.take(iteration)
        self.progress.pop(iteration, None)
        self.optimizer.step(self.params, grad, self.cfg.layout.world)
        self.applied = iteration
        self.counters["applied"] += 1
        self.emit("applied", iteration=iteration, digest=param_digest(self.params),
                  frame_bytes=self.assembler.frame_bytes.pop(iteration, 0))
        self._maybe_checkpoint()

    def _resync(self, reason: str, hole: int | None = None) -> None:
        """Replace the state with rank 0's of an iteration at least as new as any seen; the
        iterations it skips that had lost data are reported as holes."""
        if self.cfg.state_server is None:
            raise WorkloadError(f"shadow cannot resync ({reason}): no state_server configured")
        want = max([self.applied + 1, *self.assembler.seen()])
        try:
            snap = fetch_state(self.cfg.state_server, want, source=self.cfg.source_ip)
        except TransportError as exc:
            self.need_sync = reason
            self.emit("resync_failed", iteration=want, reason=reason, error=str(exc))
            raise _RetryLater from exc
        skipped = self.assembler.drop_through(snap.iteration)
        self.progress = {i: t for i, t in self.progress.items() if i > snap.iteration}
        holes = sorted(set(skipped) | ({hole} if hole is not None and hole <= snap.iteration else set()))
        for i in holes if hole is not None else ():
            self.counters["holes"] += 1
            self.emit("hole", iteration=i)
        self.gap_pending = False
        self.params = snap.params.astype("float32", copy=True)
        self.optimizer.load_state(snap.optimizer_state)
        self.applied = snap.iteration
        self.need_sync = ""
        self.counters["resyncs"] += 1
        self.emit("resync", iteration=snap.iteration, digest=param_digest(self.params), reason=reason,
                  incomplete=skipped)
        self._maybe_checkpoint(force=True)

    def _maybe_checkpoint(self, force: bool = False) -> None:
        every = self.cfg.checkpoint_every
        if not force and (self.applied + 1) % every:
            return
        t0 = time.perf_counter()
        path = save_checkpoint(Path(self.cfg.checkpoint_dir) / SHADOW_CHECKPOINT, iteration=self.applied,
                               params=self.params, optimizer_state=self.optimizer.state(),
                               meta={"source": "shadow", "digest": param_digest(self.params)})
        self.emit("checkpoint", iteration=self.applied, path=str(path), seconds=time.perf_counter() - t0)


def run(cfg: ShadowConfig, report: TextIO, *, join: bool = False, ready: TextIO = sys.stdout,
        drop_rate: float = 0.0, drop_seed: int = 0, drop_every: int = 0) -> int:
    """Capture and replicate until a signal; the process's exit status.

    ``drop_rate`` injects loss on the mirror path: each captured mirrored segment is
    discarded with that probability (a seeded, reproducible sequence), as if the shadow's
    link had lost it; ``drop_every`` discards every n-th one instead (deterministic)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: stop.set())
    replica = ShadowReplica(cfg, report, join=join)
    capture = Capture(cfg.interfaces)
    rng = random.Random(drop_seed)
    dropped = tagged = 0
    try:
        replica.emit("ready", interfaces=list(cfg.interfaces), applied=replica.applied, join=join)
        ready.write("READY\n")
        ready.flush()
        while not stop.is_set():
            now = time.monotonic()
            for seg in capture.read(0.05):
                if session_of(seg.tos) is not None and not seg.syn and seg.payload:
                    tagged += 1
                    if (drop_every and tagged % drop_every == 0) or (drop_rate and rng.random() < drop_rate):
                        dropped += 1
                        continue
                replica.on_segment(seg, now)
            replica.advance(time.monotonic())
    finally:
        capture.close()
        replica.emit("stopped", last_applied=replica.applied, captured_frames=capture.frames,
                     injected_drops=dropped, **replica.counters)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workloads.checkmate.shadow", description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, type=Path, help="the shadow's JSON configuration")
    p.add_argument("--report", required=True, type=Path, help="events, one JSON object a line (appended)")
    p.add_argument("--join", action="store_true", help="start mid-training: sync from rank 0 first")
    p.add_argument("--drop-rate", type=unit_fraction, default=0.0,
                   help="inject loss: discard each mirrored segment with this probability")
    p.add_argument("--drop-seed", type=int, default=0, help="seed of the injected loss")
    p.add_argument("--drop-every", type=int, default=0,
                   help="inject loss deterministically: discard every n-th mirrored data segment")
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level,
                        format="%(asctime)s shadow %(levelname)s %(name)s: %(message)s")
    try:
        cfg = ShadowConfig.load(args.config)
    except ConfigError as exc:
        sys.stderr.write(f"shadow: cannot start: {exc}\n")
        return 2
    try:
        with args.report.open("a") as report:
            return run(cfg, report, join=args.join, drop_rate=args.drop_rate, drop_seed=args.drop_seed,
                       drop_every=args.drop_every)
    except (WorkloadError, OSError) as exc:
        sys.stderr.write(f"shadow: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
