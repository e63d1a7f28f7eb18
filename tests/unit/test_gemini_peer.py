"""Gemini's peer checkpoint (workloads/checkmate/gemini.py) with a recorded send: chunks go
out only while the next one fits before the deadline, in order, and a checkpoint due while
one is in flight first sends the rest of it (one in flight, what training waits for)."""

from __future__ import annotations

import time

import numpy as np

from workloads.checkmate.gemini import PeerCheckpointer


class SlowPeer:
    """Records every chunk; each takes ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.chunks = seconds, []

    def __call__(self, url: str, data: bytes, offset: int, total: int, digest: str) -> None:
        time.sleep(self.seconds)
        self.chunks.append((offset, len(data), total))


def test_chunks_go_out_only_while_the_next_fits_before_the_deadline() -> None:
    peer = SlowPeer(0.02)
    p = PeerCheckpointer("http://peer/x", lambda snap: bytes(100), chunk_bytes=10, send=peer)
    p.checkpoint(0, np.zeros(3, np.float32), {"m": np.ones(3)})
    sent = p.interleave(time.perf_counter() + 0.07)  # the first chunk's time is learnt from itself
    assert 20 <= sent <= 40 and p.in_flight and p.persisted == -1
    assert p.interleave(time.perf_counter() + 0.01) == 0  # a chunk takes 20 ms: none fits in 10
    offsets = [c[0] for c in peer.chunks]
    assert offsets == list(range(0, sent, 10))


def test_a_checkpoint_due_while_one_is_in_flight_first_finishes_it() -> None:
    peer = SlowPeer(0.0)
    snaps = []
    p = PeerCheckpointer("http://peer/x", lambda snap: (snaps.append(snap[0]), bytes(35))[1], chunk_bytes=10, send=peer)
    params = np.arange(3, dtype=np.float32)
    p.checkpoint(4, params, {})
    params += 1  # the snapshot is a copy: training goes on changing its own
    p.checkpoint(9, params, {})  # 4 has not been sent at all: training waits for all of it
    assert p.persisted == 4 and p.blocking_chunks == 4 and snaps == [4]
    assert [c[0] for c in peer.chunks] == [0, 10, 20, 30] and peer.chunks[-1] == (30, 5, 35)
    p.close()
    assert p.persisted == 9 and snaps == [4, 9] and not p.in_flight
