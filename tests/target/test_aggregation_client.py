"""The hosts' all-reduce client against rail_switch's aggregation stage on the selected
target: workers' UDP sockets on the loopback, bridged packet by packet into the pipeline
(each datagram becomes the frame its worker's NIC would send, each output frame the datagram
its worker receives). The bridge loses requests and results deterministically, so recovery
by retransmission is exercised on every run."""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import replace

import numpy as np
import pytest
from conformance_project import RAIL_AGGREGATE, agg_frame
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether
from test_conformance import install, table_entry

from controller.p4build import pipeline_files
from controller.p4runtime.entities import update
from packettest import open_target
from workloads.aggregation.client import AggregationConfig, SwitchAllreduce
from workloads.aggregation.wire import AGG_UDP_PORT, WORKER_PORT, decode

WORKERS = 3


def _loopback_net() -> tuple[str, socket.socket]:
    """A 127.x.y.0/24 of this run's own (tests in parallel, or anything else on the machine,
    may hold another), with the service's socket bound in it: the first block, from one that
    follows the process id, whose service and workers' addresses are all free."""
    start = os.getpid() % 65024
    for step in range(256):
        block = (start + step * 251) % 65024 + 256
        net = f"127.{block >> 8}.{block & 255}."
        held: list[socket.socket] = []
        try:
            for host in (100, *range(1, WORKERS + 1)):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                held.append(s)
                s.bind((net + str(host), AGG_UDP_PORT if host == 100 else WORKER_PORT))
        except OSError:
            for s in held:
                s.close()
            continue
        for s in held[1:]:
            s.close()  # the workers bind their own next; the service's socket is kept
        return net, held[0]
    raise RuntimeError("no free 127.x.y.0/24 for the aggregation bridge")


class LossyBridge(threading.Thread):
    """Loopback datagrams in and out of the switch; drops request n when
    ``n % drop_requests == drop_requests - 1`` and likewise results."""

    def __init__(self, sw, *, drop_requests: int = 0, drop_results: int = 0) -> None:
        super().__init__(daemon=True)
        self.sw, self.drop_requests, self.drop_results = sw, drop_requests, drop_results
        self.net, self.sock = _loopback_net()
        self.sock.settimeout(0.1)
        self.stop = threading.Event()
        self.requests = self.results = self.dropped = 0

    def _lose(self, count: int, every: int) -> bool:
        return bool(every) and count % every == every - 1

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                payload, (ip, _) = self.sock.recvfrom(2048)
            except TimeoutError:
                continue
            self.requests += 1
            if self._lose(self.requests, self.drop_requests):
                self.dropped += 1
                continue
            worker = int(ip.rsplit(".", 1)[1]) - 1
            chunk = decode(payload)
            frame = agg_frame(worker, chunk.slot, chunk.values, job=chunk.job, flags=chunk.flags,
                              exponent=chunk.exponent)
            frame = frame[:len(frame) - len(payload)] + payload  # the worker's bytes, as sent
            for port, out in self.sw.send(worker + 1, frame, expect=None):
                self.results += 1
                if self._lose(self.results, self.drop_results):
                    self.dropped += 1
                    continue
                self.sock.sendto(bytes(Ether(out)[UDP].payload), (f"{self.net}{port}", WORKER_PORT))


def _run(sw, inputs: list[np.ndarray], *, floats: bool = False, **loss: int):
    bridge = LossyBridge(sw, **loss)
    bridge.start()
    outs: list = [None] * WORKERS
    clients = [SwitchAllreduce(f"{bridge.net}{w + 1}", f"{bridge.net}100", AggregationConfig(job=7, slots=4, min_rto_s=0.05))
               for w in range(WORKERS)]
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            outs[w] = clients[w].allreduce_float(inputs[w]) if floats else clients[w].allreduce_int32(inputs[w])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    bridge.stop.set()
    bridge.join()
    for c in clients:
        c.close()
    bridge.sock.close()
    assert not errors, errors
    return outs, [c.stats for c in clients], bridge


@pytest.fixture()
def switch(target_name: str):
    if target_name != "python":
        pytest.skip("the bridge drives the in-process switch; BMv2 runs the same pipeline in "
                    "test_aggregation_pipeline.py and the emulation tests")
    with open_target(target_name, pipeline_files("rail_switch")) as sw:
        install(sw, RAIL_AGGREGATE)
        yield sw


def test_integer_all_reduce_is_exact_over_many_slot_reuses(switch) -> None:
    rng = np.random.default_rng(7)
    inputs = [rng.integers(-2**20, 2**20, size=1000, dtype=np.int32) for _ in range(WORKERS)]
    outs, stats, bridge = _run(switch, inputs)
    expected = np.sum(inputs, axis=0, dtype=np.int32)
    for out in outs:
        np.testing.assert_array_equal(out, expected)
    assert all(s.retransmitted == 0 for s in stats) and bridge.dropped == 0
    assert [s.received for s in stats] == [16] * WORKERS, "16 chunks of 64 through 4 slots"


def test_lost_requests_and_results_are_recovered_exactly(switch) -> None:
    rng = np.random.default_rng(8)
    inputs = [rng.integers(-1000, 1000, size=2000, dtype=np.int32) for _ in range(WORKERS)]
    outs, stats, bridge = _run(switch, inputs, drop_requests=11, drop_results=13)
    expected = np.sum(inputs, axis=0, dtype=np.int32)
    for out in outs:
        np.testing.assert_array_equal(out, expected)
    assert bridge.dropped > 0 and sum(s.retransmitted for s in stats) > 0
    assert sum(s.answered_duplicates for s in stats) > 0, "lost results came back from the completed set"


def test_float_all_reduce_is_within_the_quantisation_bound(switch) -> None:
    rng = np.random.default_rng(9)
    inputs = [rng.normal(0, 3, size=700).astype(np.float32) for _ in range(WORKERS)]
    outs, _, _ = _run(switch, inputs, floats=True)
    expected = np.sum(np.array(inputs, dtype=np.float64), axis=0)
    for out, bound in outs:
        assert 0 < bound < 1e-6
        assert np.max(np.abs(out.astype(np.float64) - expected)) <= bound + 1e-6 * np.max(np.abs(expected))
    # new workers start every slot in set 0 again: the pool needs a new epoch, as `aggregate
    # add` gives it, or the switch would answer them from the rounds the last workers left
    switch.client.write([update("modify", table_entry(switch, replace(r, params={**r.params, "epoch": 6})))
                         for r in RAIL_AGGREGATE.rules if r.table.endswith("agg_workers")])
    integral = [np.arange(300, dtype=np.float32) * (w + 1) for w in range(WORKERS)]
    outs, _, _ = _run(switch, integral, floats=True)
    for out, _ in outs:
        np.testing.assert_array_equal(out, np.arange(300, dtype=np.float32) * 6), "integer-valued: exact"
