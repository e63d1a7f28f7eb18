"""Collectives and transport in one process: one thread per rank, meshes on loopback.

Faster than worker processes, so it covers more layouts: odd server counts (PXN relays),
one server, one rail, and the transport's failure modes.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from workloads.collectives import alltoall, barrier, hier_allreduce, ring_allreduce
from workloads.config import WorkloadConfig
from workloads.errors import PeerClosed, PeerTimeout, ProtocolError, TransportError
from workloads.loopback import loopback_config
from workloads.ops import allreduce_input, alltoall_input, check_allreduce, check_alltoall
from workloads.plan import alltoall_plan, ring_plan
from workloads.transport import Mesh, make_tag


def on_all(world: int, fn: Callable[[int], Any], timeout: float = 30.0) -> list[Any]:
    """Run ``fn(rank)`` in one thread per rank; return results, or raise the first error."""
    results: list[Any] = [None] * world
    errors: list[BaseException | None] = [None] * world

    def body(k: int) -> None:
        try:
            results[k] = fn(k)
        except BaseException as exc:
            errors[k] = exc

    threads = [threading.Thread(target=body, args=(k,), daemon=True) for k in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a rank hung"
    for exc in errors:
        if exc is not None:
            raise exc
    return results


@contextmanager
def meshes(config: WorkloadConfig) -> Iterator[list[Mesh]]:
    ms = on_all(config.layout.world, lambda k: Mesh.start(config, k))
    try:
        yield ms
    finally:
        for m in ms:
            m.close()


SHAPES = [(1, 3), (3, 1), (2, 3), (3, 2), (3, 3)]


@pytest.mark.parametrize(("servers", "rails"), SHAPES)
def test_collectives_on_many_layouts(servers: int, rails: int) -> None:
    config = loopback_config(servers, rails, timeout_s=5.0, mesh="full")
    world, n = config.layout.world, 10_007
    with meshes(config) as ms:
        def allreduces(k: int) -> None:
            mesh = ms[k]
            barrier(mesh)
            for kind in ("pxn", "direct", "aligned"):
                buf = allreduce_input(k, n)
                phases = ring_allreduce(mesh, ring_plan(config.layout, kind), buf)
                assert set(phases) == {"reduce_scatter", "allgather"}
                check_allreduce(buf, tuple(range(world)), kind)
            buf = allreduce_input(k, n)
            hier_allreduce(mesh, buf)
            check_allreduce(buf, tuple(range(world)), "hier")
            for kind in ("direct", "hier"):
                out, _ = alltoall(mesh, alltoall_plan(config.layout, kind), alltoall_input(k, world, 5))
                check_alltoall(out, k, kind)

        on_all(world, allreduces)


def test_frames_out_of_step_are_a_protocol_error() -> None:
    config = loopback_config(1, 2, timeout_s=5.0)
    with meshes(config) as (a, b):
        a.send(1, make_tag(1, 0), np.zeros(4, dtype=np.float32))
        with pytest.raises(ProtocolError, match="expected frame 0x200000, got 0x100000"):
            b.recv_into(0, make_tag(2, 0), np.empty(4, dtype=np.float32))
    with meshes(loopback_config(1, 2, timeout_s=5.0)) as (a, b):
        a.send(1, make_tag(1, 0), np.zeros(4, dtype=np.float32))
        with pytest.raises(ProtocolError, match="has 16 bytes, expected 8"):
            b.recv_into(0, make_tag(1, 0), np.empty(2, dtype=np.float32))


def test_a_silent_peer_times_out_and_the_mesh_aborts() -> None:
    config = loopback_config(1, 3, timeout_s=0.5)
    with meshes(config) as (a, _b, c):
        start = time.monotonic()
        # one silent peer only: with two, which of them times out first would be a race
        with pytest.raises(PeerTimeout, match=r"rank 1 \(127.0.1.2\) over NVLink: no progress for 0.5 s"):
            a.exchange(recvs=[(1, 7, np.empty(1, dtype=np.uint8))])
        assert time.monotonic() - start < 2.0
        assert a.broken is not None
        with pytest.raises(TransportError, match="mesh unusable"):
            a.exchange(sends=[(1, 7, b"x")])
        # the peers of an aborted rank see their connections closed at once
        with pytest.raises(PeerClosed, match="closed the connection"):
            c.recv_into(0, 7, np.empty(1, dtype=np.uint8))


def test_an_abort_unblocks_a_send_stuck_on_a_full_socket() -> None:
    config = loopback_config(1, 3, timeout_s=10.0)
    with meshes(config) as (a, _b, c):
        big = np.zeros(64 << 20, dtype=np.uint8)  # far more than the socket buffers: blocks
        threading.Timer(0.3, c.abort, args=("test",)).start()
        start = time.monotonic()
        with pytest.raises(PeerClosed, match=r"from rank 2 \(127.0.1.3\) over NVLink: it closed the connection"):
            a.exchange(sends=[(1, 7, big)], recvs=[(2, 7, np.empty(1, dtype=np.uint8))])
        assert time.monotonic() - start < 3.0  # not the 10 s timeout of the stuck send


def test_a_cross_rail_peer_is_not_connected_on_a_rail_mesh() -> None:
    config = loopback_config(2, 2, timeout_s=5.0)
    with meshes(config) as ms:
        assert sorted(ms[0].conns) == [1, 2]
        with pytest.raises(TransportError, match=r"no connection to rank 3 .*mesh 'full'"):
            ms[0].require({1, 2, 3}, "alltoall")


def test_start_names_the_peers_that_never_came() -> None:
    # a rank calls its lower peers and waits for its higher ones (workloads.handshake)
    config = loopback_config(1, 2, timeout_s=5.0, start_timeout_s=0.5)
    with pytest.raises(TransportError, match=r"rank 1 \(127.0.1.2\): cannot connect to rank 0"):
        Mesh.start(config, 1)
    with pytest.raises(TransportError, match=r"rank 0 \(127.0.1.1\): ranks \[1\] did not connect"):
        Mesh.start(config, 0)


def test_a_stranger_is_rejected_by_the_hello() -> None:
    # the two GPUs of one server talk TCP here (local: tcp): a stranger calls on the TCP port
    config = loopback_config(1, 2, timeout_s=5.0, start_timeout_s=1.0, local="tcp")
    got: dict[str, Any] = {}

    def stranger() -> None:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.1.1", config.listen_port(0)), timeout=0.5) as s:
                    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                    got["reply"] = s.recv(100)
                    return
            except OSError:
                time.sleep(0.05)

    t = threading.Thread(target=stranger)
    t.start()
    with pytest.raises(TransportError, match=r"ranks \[1\] did not connect .*rejected: 127\.0\.0\.1"):
        Mesh.start(config, 0)
    t.join()
