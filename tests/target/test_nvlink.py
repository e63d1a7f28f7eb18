"""The intra-server "NVLink": GPUs of one server talk over Unix sockets paced to a modelled
per-GPU rate, never over the host's TCP/IP stack; each GPU's egress and ingress hold the
rate, so two GPUs sending to one share its ingress. Timings are checked from below only
(pacing sleeps at least as long as the model says) and against a generous bound above."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest
from test_workloads_collectives import meshes, on_all

from workloads.collectives import hier_allreduce
from workloads.loopback import loopback_config
from workloads.nvlink import NvlinkClock, PacedConnection
from workloads.ops import allreduce_input, check_allreduce
from workloads.transport import make_tag

RATE = 20e6  # bytes/s: 1 MB takes 50 ms


def test_same_server_gpus_talk_over_unix_sockets_and_other_servers_over_tcp() -> None:
    config = loopback_config(2, 2, timeout_s=5.0, nvlink_bytes_per_s=RATE)
    with meshes(config) as ms:
        local, rail = ms[0].conns[1], ms[0].conns[2]
        assert isinstance(local, PacedConnection) and local.sock.family == socket.AF_UNIX
        assert not isinstance(rail, PacedConnection) and rail.sock.family == socket.AF_INET


def test_one_transfer_takes_what_the_rate_says() -> None:
    config = loopback_config(1, 2, timeout_s=5.0, nvlink_bytes_per_s=RATE)
    size = 2_000_000
    with meshes(config) as (a, b):
        data, out = np.arange(size, dtype=np.uint8), np.empty(size, dtype=np.uint8)
        sent, received = a.nvlink.sent, b.nvlink.received  # the hellos'
        start = time.monotonic()
        on_all(2, lambda k: a.exchange(sends=[(1, make_tag(1, 0), data)]) if k == 0
               else b.exchange(recvs=[(0, make_tag(1, 0), out)]))
        took = time.monotonic() - start
        assert np.array_equal(out, data)
        assert size / RATE <= took < 10 * size / RATE
        assert a.nvlink.sent - sent == size + 16 == b.nvlink.received - received  # the frame's header too


def test_two_senders_share_one_gpus_ingress() -> None:
    config = loopback_config(1, 3, timeout_s=5.0, nvlink_bytes_per_s=RATE)
    size = 1_000_000
    with meshes(config) as (a, b, c):
        data = np.ones(size, dtype=np.uint8)
        outs = [np.empty(size, dtype=np.uint8) for _ in range(2)]
        tag = make_tag(1, 0)
        start = time.monotonic()
        on_all(3, lambda k: [
            lambda: a.exchange(recvs=[(1, tag, outs[0]), (2, tag, outs[1])]),
            lambda: b.exchange(sends=[(0, tag, data)]),
            lambda: c.exchange(sends=[(0, tag, data)]),
        ][k]())
        took = time.monotonic() - start
        assert all(np.array_equal(o, data) for o in outs)
        # each sender's egress alone would allow size / RATE; the shared ingress needs twice it
        assert 2 * size / RATE <= took < 20 * size / RATE


def test_collectives_are_exact_over_paced_nvlink() -> None:
    config = loopback_config(2, 2, timeout_s=5.0, nvlink_bytes_per_s=RATE)
    n = 10_007
    with meshes(config) as ms:
        def run(k: int) -> None:
            buf = allreduce_input(k, n)
            hier_allreduce(ms[k], buf)
            check_allreduce(buf, tuple(range(4)), "hier")
        on_all(4, run)


def test_the_clock_paces_nothing_at_rate_zero_and_refuses_a_negative_rate() -> None:
    clock = NvlinkClock(0)
    start = time.monotonic()
    for _ in range(100):
        clock.sent_bytes(1 << 30)
        clock.received_bytes(1 << 30)
    assert time.monotonic() - start < 1.0 and clock.sent == 100 << 30
    with pytest.raises(ValueError, match="must be >= 0"):
        NvlinkClock(-1.0)
