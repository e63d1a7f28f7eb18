"""The shadow's whole receive path in process: mirrored TCP segments in, an exact replica out.

Frames are built as the trainer sends them (one per mirrored all-gather send), cut into TCP
segments and fed to :class:`ShadowReplica`; the replica must equal a direct replay of the
optimizer on the same gradients, and a lost segment must give a reported hole and a resync
from a real state server on loopback, never a wrong replica.
"""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path

import numpy as np
import pytest

from workloads.checkmate.capture import Segment
from workloads.checkmate.capture_plan import capture_plan
from workloads.checkmate.model import ModelSpec, init_params, param_digest
from workloads.checkmate.optim import Optimizer, OptimizerSpec
from workloads.checkmate.shadow import ShadowConfig, ShadowReplica
from workloads.checkmate.state_channel import StateServer
from workloads.checkmate.tagging import mirror_tos
from workloads.checkmate.training import CIDS_PER_ITERATION, TrainingConfig
from workloads.collectives import chunk_bounds
from workloads.framing import HEADER, make_tag
from workloads.plan import Layout, ring_plan

SPEC = ModelSpec(hidden=8, seed=3, batch=12)
LAYOUT = Layout.grid(3, 2, lambda d, r: f"127.0.{r}.{d + 1}")
MIRROR_PORT = 7100


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gradients(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    size = init_params(SPEC).size
    return [rng.standard_normal(size).astype(np.float32) * np.float32(0.1) for _ in range(n)]


def _replay(grads: list[np.ndarray], spec: OptimizerSpec) -> tuple[list[str], list[tuple]]:
    params, opt = init_params(SPEC), Optimizer(spec, init_params(SPEC).size)
    digests, states = [], []
    for g in grads:
        opt.step(params, g, LAYOUT.world)
        digests.append(param_digest(params))
        states.append((params.copy(), opt.state()))
    return digests, states


def _segments(grads: list[np.ndarray], mss: int = 700) -> list[Segment]:
    """Every mirrored leg's stream, cut into segments, the SYN first; legs interleaved."""
    plan = capture_plan(LAYOUT, ring_plan(LAYOUT))
    bounds = chunk_bounds(grads[0].size, plan.chunks)
    per_leg = []
    for k, leg in enumerate(plan.legs):
        src, dst = LAYOUT[leg.sender].ip, LAYOUT[leg.receiver].ip
        isn = (2**32 - 3000) if k == 0 else 12345  # the first leg's sequence numbers wrap
        data = io.BytesIO()
        for it, g in enumerate(grads):
            for step, chunk in zip(leg.steps, leg.chunks, strict=True):
                a, b = bounds[chunk]
                payload = g[a:b].tobytes()
                data.write(HEADER.pack(make_tag(it * CIDS_PER_ITERATION + 3, step), len(payload)) + payload)
        raw = data.getvalue()
        segs = [Segment(src, dst, 40000 + k, MIRROR_PORT + leg.receiver, mirror_tos(2), isn, True, b"", 60)]
        segs += [Segment(src, dst, 40000 + k, MIRROR_PORT + leg.receiver, mirror_tos(2),
                         (isn + 1 + off) % 2**32, False, raw[off:off + mss], 60 + mss)
                 for off in range(0, len(raw), mss)]
        per_leg.append(segs)
    out = []
    for i in range(max(map(len, per_leg))):
        out += [segs[i] for segs in per_leg if i < len(segs)]
    return out


def _replica(tmp_path: Path, kind: str, state_port: int | None = None) -> tuple[ShadowReplica, io.StringIO]:
    training = TrainingConfig(model=SPEC, optimizer=OptimizerSpec(kind=kind, lr=0.05), session=2,
                              mirror_port=MIRROR_PORT, state_port=state_port or 0)
    cfg = ShadowConfig(training=training, layout=LAYOUT, interfaces=("none",),
                       state_server=("127.0.0.1", state_port) if state_port else None, source_ip=None,
                       checkpoint_dir=str(tmp_path), checkpoint_every=1, hole_timeout_s=0.5)
    report = io.StringIO()
    return ShadowReplica(cfg, report), report


def _events(report: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in report.getvalue().splitlines()]


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_replica_equals_a_direct_replay_bit_for_bit(tmp_path: Path, kind: str) -> None:
    grads = _gradients(12)
    expected, _ = _replay(grads, OptimizerSpec(kind=kind, lr=0.05))
    shadow, report = _replica(tmp_path, kind)
    segs = _segments(grads)
    rng = np.random.default_rng(1)
    for i in rng.permutation(len(segs))[:40]:  # some duplicates, out of order
        segs.append(segs[int(i)])
    for s in segs:
        shadow.on_segment(s, now=0.0)
        shadow.advance(0.0)
    applied = {e["iteration"]: e["digest"] for e in _events(report) if e["event"] == "applied"}
    assert applied == dict(enumerate(expected))
    assert shadow.assembler.buffered_bytes() == 0, "applied iterations must be freed"


def test_a_lost_segment_is_a_reported_hole_then_a_resync(tmp_path: Path) -> None:
    grads = _gradients(10)
    spec = OptimizerSpec(kind="sgd", lr=0.05)
    expected, states = _replay(grads, spec)
    port = _free_port()
    server = StateServer("127.0.0.1", port, wait_s=2.0)
    try:
        params, opt_state = states[-1]
        server.publish(len(grads) - 1, params, opt_state)
        shadow, report = _replica(tmp_path, "sgd", state_port=port)
        segs = _segments(grads)
        lost = len(segs) // 3  # a data segment in the middle of the run
        for i, s in enumerate(segs):
            if i != lost:
                shadow.on_segment(s, now=0.0)
            shadow.advance(0.0)
        shadow.advance(5.0)  # past the hole timeout
    finally:
        server.close()
    events = _events(report)
    holes = [e["iteration"] for e in events if e["event"] == "hole"]
    resyncs = [e for e in events if e["event"] == "resync"]
    # the lost 700 bytes cut the frames of iterations 8 and 9 on the complement leg
    assert holes == [8, 9] and resyncs and resyncs[0]["iteration"] == len(grads) - 1
    state = {e["iteration"]: e["digest"] for e in events if e["event"] in ("applied", "resync")}
    assert all(expected[i] == d for i, d in state.items()), "never a diverged replica"
    assert 8 not in state and shadow.applied == len(grads) - 1


def test_other_sessions_and_flows_are_ignored(tmp_path: Path) -> None:
    shadow, _ = _replica(tmp_path, "sgd")
    seg = _segments(_gradients(1))[1]
    shadow.on_segment(Segment(seg.src, seg.dst, seg.sport, seg.dport, mirror_tos(3), seg.seq, False,
                              seg.payload, 100), now=0.0)
    shadow.on_segment(Segment(seg.src, seg.dst, seg.sport, 9999, seg.tos, seg.seq, False, seg.payload, 100),
                      now=0.0)
    shadow.on_segment(Segment(seg.src, seg.dst, seg.sport, seg.dport, 0x00, seg.seq, False, seg.payload, 100),
                      now=0.0)  # untagged: the shadow's own side-channel traffic, not crosstalk
    assert shadow.counters["ignored"] == 2 and not shadow.streams
