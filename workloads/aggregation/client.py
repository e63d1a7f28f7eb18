"""The all-reduce through the switch, from one worker: stream a tensor in 64-value chunks
through a window of the job's slots, one chunk per slot in flight, and take the sums back.

Chunk ``k`` uses slot ``k % slots``; a slot's next chunk goes out when its result came back,
in the slot's other set (SwitchML's rule, which keeps the last result readable for the
workers that lost it). A chunk whose result does not come back within the retransmission
timeout is sent again as it was: the switch answers a duplicate from the completed set, or
drops it while the round is still filling, and never adds it twice. The timeout is TCP's
(RFC 6298: smoothed round trip plus four deviations, ``max_rto_s`` until the first sample,
no sample from a retransmitted chunk), doubling on each expiry up to ``max_rto_s``.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

import numpy as np

from workloads.aggregation.quantize import (
    dequantize,
    error_bound,
    local_exponent,
    quantize,
    scale_for,
)
from workloads.aggregation.wire import (
    AGG_UDP_PORT,
    EXPONENT_BIAS,
    FLAG_RESULT,
    FLAG_RETRANSMIT,
    FLAG_SET,
    FRAME_BYTES,
    HEADER_BYTES,
    LANES,
    PAYLOAD_BYTES,
    WORKER_PORT,
)
from workloads.errors import ConfigError, WorkloadError

__all__ = ["AggregationConfig", "AggregationTimeout", "SwitchAllreduce", "TransferStats"]

_HEADER = struct.Struct("!BBHIBBHI")
_WIRE_INT32 = np.dtype(">i4")


class AggregationTimeout(WorkloadError):
    """The switch stopped answering: no result for ``give_up_s``."""


@dataclass(frozen=True, kw_only=True)
class AggregationConfig:
    """One worker's view of an installed job (``mlfabric aggregate add``)."""

    job: int
    slots: int = 64
    port: int = WORKER_PORT
    #: TCP's floor: a window's last chunk waits for the whole window to drain at every worker, which a
    #: single round trip (the exponent's) does not show; 200 ms covers a 64-slot window down to 1 Mbit/s
    min_rto_s: float = 0.2
    max_rto_s: float = 1.0
    give_up_s: float = 30.0
    #: lose every Nth packet this worker sends and every Nth it receives (0: none): loss at
    #: the worker's NIC, where the emulation has no netem or iptables to lose it on the link
    drop_every: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.job <= 255:
            raise ConfigError("aggregation", "job", self.job, "must be 1..255")
        if not 1 <= self.slots <= 1024:
            raise ConfigError("aggregation", "slots", self.slots, "must be 1..1024")
        if self.drop_every < 0 or self.drop_every == 1:
            raise ConfigError("aggregation", "drop_every", self.drop_every, "must be 0 (no loss) or at least 2")
        if not 0 < self.min_rto_s <= self.max_rto_s:
            raise ConfigError("aggregation", "min_rto_s", (self.min_rto_s, self.max_rto_s),
                              "need 0 < min_rto_s <= max_rto_s")


@dataclass
class TransferStats:
    """What one worker put on and took off the wire, in aggregation packets."""

    sent: int = 0
    received: int = 0
    retransmitted: int = 0
    answered_duplicates: int = 0  # results the switch sent again from a completed set
    stale: int = 0  # results for a chunk already done
    lost: int = 0  # packets lost on purpose (AggregationConfig.drop_every)
    rtt_samples: list[float] = field(default_factory=list)

    @property
    def bytes_sent(self) -> int:
        return self.sent * FRAME_BYTES

    @property
    def bytes_received(self) -> int:
        return self.received * FRAME_BYTES

    def as_dict(self) -> dict[str, int]:
        return {"packets_sent": self.sent, "packets_received": self.received, "retransmitted": self.retransmitted,
                "answered_duplicates": self.answered_duplicates, "stale_results": self.stale, "lost": self.lost,
                "bytes_sent": self.bytes_sent, "bytes_received": self.bytes_received}


class SwitchAllreduce:
    """All-reduces through the aggregating switch at ``service`` (its rail's service address),
    from a socket bound to ``bind_ip``: every worker of the job calls the same operations in
    the same order."""

    def __init__(self, bind_ip: str, service: str, config: AggregationConfig) -> None:
        self.config = config
        self.service = service
        self.stats = TransferStats()
        self._sets = bytearray(config.slots)  # each slot's next set (plain bytes: read per packet)
        self._rto = config.max_rto_s  # RFC 6298's conservative start, until the first sample
        self._srtt: float | None = None
        self._rttvar = 0.0
        self._sends = self._receives = 0
        #: the loss at this worker's NIC, changeable between calls (the slots' sets stay)
        self.drop_every = config.drop_every
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            self._sock.bind((bind_ip, config.port))
            self._sock.connect((service, AGG_UDP_PORT))
        except OSError as exc:
            self._sock.close()
            raise WorkloadError(f"aggregation job {config.job}: cannot use {bind_ip}:{config.port} "
                                f"towards {service}: {exc.strerror or exc}") from exc

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> SwitchAllreduce:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ operations

    def allreduce_int32(self, values: np.ndarray) -> np.ndarray:
        """The sum over the job's workers of ``values`` (int32, wrapping as the switch adds)."""
        out, _, _ = self._stream(np.ascontiguousarray(values, dtype=np.int32), EXPONENT_BIAS)
        return out

    def allreduce_float(self, values: np.ndarray) -> tuple[np.ndarray, float]:
        """The sum over the job's workers, through int32 with a shared exponent, and the bound
        on each element's error (0 for integer-valued tensors of moderate size). One extra
        round trip agrees on the exponent."""
        _, exponent, workers = self._stream(np.zeros(LANES, dtype=np.int32), local_exponent(values))
        scale = scale_for(exponent, workers)
        sums, _, _ = self._stream(quantize(values, scale), exponent)
        return dequantize(sums, scale, values.dtype), error_bound(scale, workers)

    # ------------------------------------------------------------ the window

    def _stream(self, data: np.ndarray, exponent: int) -> tuple[np.ndarray, int, int]:
        """Every chunk of ``data`` through the switch; the sums, the largest exponent and the
        number of workers that contributed."""
        cfg, n = self.config, len(data)
        chunks = max(1, -(-n // LANES))
        padded = np.zeros(chunks * LANES, dtype=_WIRE_INT32)
        padded[:n] = data
        wire = memoryview(padded.tobytes())  # per packet: slices of bytes, no numpy call
        values_bytes = LANES * 4
        out = bytearray(chunks * values_bytes)  # the sums as they came, big-endian
        in_flight: dict[int, list] = {}  # slot -> [chunk, payload, sent at, retransmitted]
        max_exponent, workers = 0, 0
        done = 0
        last_progress = time.monotonic()
        header = _HEADER.pack
        sets = self._sets

        def send(k: int) -> None:
            slot = k % cfg.slots
            payload = header(cfg.job, sets[slot] & FLAG_SET, slot, k * LANES, exponent, 0, 0, 0) + \
                wire[k * values_bytes:(k + 1) * values_bytes]
            self._send(payload)
            in_flight[slot] = [k, payload, time.monotonic(), False]

        for k in range(min(cfg.slots, chunks)):
            send(k)
        pending: list[bytes] = []  # received, not yet handled (newest first)
        while done < chunks:
            now = time.monotonic()
            deadline = next(iter(in_flight.values()))[2] + self._rto  # kept in the order they were sent
            if deadline <= now:
                self._retransmit(in_flight, now)
                if now - last_progress > cfg.give_up_s:
                    slot = min(in_flight)
                    raise AggregationTimeout(
                        f"aggregation job {cfg.job}: no result from {self.service} for {cfg.give_up_s:.0f} s "
                        f"(slot {slot}, chunk {in_flight[slot][0]} of {chunks}): is the job installed on the switch?")
                continue
            if pending:
                payload = pending.pop()
            else:
                self._sock.settimeout(deadline - now)
                try:
                    payload = self._sock.recv(PAYLOAD_BYTES + 64)
                except TimeoutError:
                    continue
                pending = self._drain()  # what else is queued: one poll for a burst
            if len(payload) != PAYLOAD_BYTES or self._lose_received():
                continue
            job, flags, slot, offset, result_exponent, result_workers, _, _ = _HEADER.unpack_from(payload)
            entry = in_flight.get(slot)
            if (job != cfg.job or not flags & FLAG_RESULT or entry is None or entry[0] * LANES != offset
                    or (flags & FLAG_SET) != sets[slot]):
                self.stats.stale += 1
                continue
            k, _, sent_at, retransmitted = entry
            self.stats.received += 1
            if flags & FLAG_RETRANSMIT:
                self.stats.answered_duplicates += 1
            if not retransmitted:
                self._sample(time.monotonic() - sent_at)
            out[k * values_bytes:(k + 1) * values_bytes] = payload[HEADER_BYTES:]
            max_exponent = max(max_exponent, result_exponent)
            workers = max(workers, result_workers)
            sets[slot] ^= 1
            del in_flight[slot]
            done += 1
            last_progress = time.monotonic()
            if k + cfg.slots < chunks:  # the slot's next chunk: results may come back out of order
                send(k + cfg.slots)
        return np.frombuffer(out, dtype=_WIRE_INT32)[:n].astype(np.int32), max_exponent, workers

    def _drain(self, limit: int = 64) -> list[bytes]:
        """The datagrams already queued on the socket (up to ``limit``), newest first."""
        got: list[bytes] = []
        self._sock.settimeout(0.0)  # non-blocking: a timeout would make an empty queue wait
        while len(got) < limit:
            try:
                got.append(self._sock.recv(PAYLOAD_BYTES + 64))
            except (BlockingIOError, InterruptedError):
                break
        got.reverse()
        return got

    def _retransmit(self, in_flight: dict[int, list], now: float) -> None:
        expired = [slot for slot, entry in in_flight.items() if entry[2] + self._rto <= now]
        for slot in expired:
            entry = in_flight.pop(slot)
            self._send(entry[1])
            self.stats.retransmitted += 1
            entry[2], entry[3] = now, True
            in_flight[slot] = entry  # last: the oldest send stays first
        self._rto = min(2 * self._rto, self.config.max_rto_s)

    def _send(self, payload: bytes) -> None:
        self._sends += 1
        self.stats.sent += 1
        every = self.drop_every
        if every and self._sends % every == 0:
            self.stats.lost += 1
            return
        self._sock.send(payload)

    def _lose_received(self) -> bool:
        self._receives += 1
        every = self.drop_every
        if every and self._receives % every == 0:
            self.stats.lost += 1
            return True
        return False

    def _sample(self, rtt: float) -> None:
        if len(self.stats.rtt_samples) < 100_000:
            self.stats.rtt_samples.append(rtt)
        if self._srtt is None:
            self._srtt, self._rttvar = rtt, rtt / 2
        else:
            self._rttvar = 0.75 * self._rttvar + 0.25 * abs(self._srtt - rtt)
            self._srtt = 0.875 * self._srtt + 0.125 * rtt
        self._rto = min(max(self._srtt + 4 * self._rttvar, self.config.min_rto_s), self.config.max_rto_s)
