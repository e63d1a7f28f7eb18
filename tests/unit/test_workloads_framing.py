"""Framed connections and their sockets: a receiver wakes per WAKE_BYTES of a frame, never past
the frame's end; every connection runs the configured congestion control."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from workloads.framing import HEADER, WAKE_BYTES, Connection
from workloads.plan import Rank


@pytest.fixture
def pair() -> Iterator[tuple[Connection, Connection]]:
    """Two ends of a TCP connection on loopback (SO_RCVLOWAT is TCP's), each with a 5 s
    progress timeout: a receive the low-water mark kept asleep fails with PeerTimeout."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        a = socket.create_connection(server.getsockname())
        b, _ = server.accept()
    me, peer = Rank(0, 0, 0, "127.0.0.1"), Rank(1, 0, 1, "127.0.0.1")
    left, right = Connection(a, me, peer, 5.0), Connection(b, peer, me, 5.0)
    for s in (a, b):
        s.settimeout(5.0)
    yield left, right
    left.close()
    right.close()


def lowat(conn: Connection) -> int:
    return conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)


def test_wake_at_caps_at_wake_bytes_and_follows_what_is_left(pair: tuple[Connection, Connection]) -> None:
    _, rx = pair
    rx.wake_at(10 * WAKE_BYTES)
    assert lowat(rx) == WAKE_BYTES
    rx.wake_at(100)
    assert lowat(rx) == 100
    rx.wake_at(0)
    assert lowat(rx) == 1


def test_frames_arriving_in_pieces_are_whole_and_small_frames_after_big_ones_do_not_wait(
        pair: tuple[Connection, Connection]) -> None:
    tx, rx = pair
    big = np.arange(3 * WAKE_BYTES // 4 + 123, dtype=np.float32)
    small = np.arange(5, dtype=np.float32)

    def send() -> None:
        """Frame 1 trickles in, in pieces smaller than WAKE_BYTES; then frame 2 at once."""
        tx.send_all(memoryview(HEADER.pack(1, big.nbytes)))
        raw = memoryview(big.view(np.uint8))
        for off in range(0, len(raw), 10_000):
            tx.send_all(raw[off:off + 10_000])
            time.sleep(0.001)
        tx.send_frame(2, small)

    thread = threading.Thread(target=send)
    thread.start()
    got_big, got_small = np.empty_like(big), np.empty_like(small)
    rx.recv_frame_into(1, got_big)
    rx.recv_frame_into(2, got_small)  # PeerTimeout if the low-water mark stayed above its 20 bytes
    thread.join()
    assert np.array_equal(got_big, big) and np.array_equal(got_small, small)
    assert lowat(rx) == small.nbytes


def test_mesh_connections_run_the_configured_congestion_control_or_fail_naming_it() -> None:
    from workloads.config import WorkloadConfig
    from workloads.errors import TransportError
    from workloads.handshake import _setup
    from workloads.plan import Layout

    layout = Layout.grid(1, 2, lambda d, r: f"127.0.1.{r + 1}")
    assert WorkloadConfig(layout=layout).tcp_congestion == ""  # the machine's, unless a job says
    with socket.socket() as sock:
        _setup(sock, WorkloadConfig(layout=layout, tcp_congestion="reno"))  # reno is always built in
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0") == b"reno"
        with pytest.raises(TransportError, match=r"TCP congestion control 'nosuch': .*available: "):
            _setup(sock, WorkloadConfig(layout=layout, tcp_congestion="nosuch"))


def test_a_bad_congestion_control_name_is_refused_when_the_job_is_read() -> None:
    from workloads.config import WorkloadConfig
    from workloads.errors import ConfigError

    ranks = [{"rank": 0, "server": 0, "rail": 0, "ip": "127.0.1.1"}]
    with pytest.raises(ConfigError, match="tcp_congestion: must be a congestion control's name"):
        WorkloadConfig.from_dict({"ranks": ranks, "servers": 1, "rails": 1, "tcp_congestion": "Cubic; rm"})
    assert WorkloadConfig.from_dict({"ranks": ranks, "servers": 1, "rails": 1}).to_dict()["tcp_congestion"] == ""
