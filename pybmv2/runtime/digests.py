"""Digest batching: samples -> DigestList messages, with PI's DigestEntry semantics.

Pure logic driven by explicit timestamps (nanoseconds); the device calls :meth:`add` from
the data plane, :meth:`tick` periodically and :meth:`ack` for every DigestListAck.
Behaviour follows PI's ``digest_mgr.cpp``:

- samples of a digest are dropped until a DigestEntry configures it (INSERT; a second
  INSERT is ALREADY_EXISTS, MODIFY/DELETE of an unconfigured digest NOT_FOUND, an unknown
  digest id NOT_FOUND, reading with digest_id 0 UNIMPLEMENTED);
- ``max_timeout_ns == 0`` sends every sample at once; otherwise samples are buffered and
  the list goes out when it reaches ``max_list_size`` (if non-zero) or when its oldest
  sample is ``max_timeout_ns`` old;
- with ``ack_timeout_ns > 0`` a sample equal to one already pending or sent and not yet
  acknowledged is suppressed; an ack (or the ack timeout) releases the samples of a list;
- ``list_id`` starts at 1 and increases with every list sent.

One addition: a list also goes out once it holds :func:`max_samples` samples, so that no
DigestList outgrows :data:`MAX_LIST_BYTES` (a controller with gRPC's default 4 MiB limit
would lose its stream to a bigger one). PI has no such bound: with ``max_list_size`` 0 and
a long ``max_timeout_ns`` its lists grow with the traffic.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import grpc
from p4.v1 import p4runtime_pb2

from pybmv2.runtime.errors import P4RuntimeError
from pybmv2.runtime.p4info import DigestInfo
from pybmv2.runtime.packetio import digest_data

__all__ = ["MAX_LIST_BYTES", "DigestConfig", "DigestEngine", "max_samples"]

Sample = tuple[int, ...]
#: the largest DigestList the target sends, a quarter of gRPC's default 4 MiB limit
MAX_LIST_BYTES = 1 << 20


def max_samples(info: DigestInfo, limit: int = MAX_LIST_BYTES) -> int:
    """How many samples of ``info`` a DigestList of at most ``limit`` bytes surely holds:
    ``limit`` over a sample's largest encoding (a member is a P4Data bitstring, framed twice
    in 4 bytes; the sample's own frames take at most 8 more).

    >>> from pybmv2.runtime.p4info import DigestInfo
    >>> max_samples(DigestInfo(1, "mac_learn", "struct", (48, 9)), limit=1000)
    41
    """
    per_sample = sum(4 + (w + 7) // 8 for w in info.bitwidths) + 8
    return max(1, limit // per_sample)


@dataclass(frozen=True)
class DigestConfig:
    max_timeout_ns: int = 0
    max_list_size: int = 0
    ack_timeout_ns: int = 0


@dataclass
class _Digest:
    info: DigestInfo
    config: DigestConfig | None = None
    pending: list[Sample] = field(default_factory=list)
    first_pending_ns: int = 0
    next_list_id: int = 1
    #: list_id -> (samples, time sent) of lists awaiting an ack (only with ack_timeout_ns)
    unacked: dict[int, tuple[list[Sample], int]] = field(default_factory=dict)
    cache: set[Sample] = field(default_factory=set)

    def reset(self) -> None:
        self.config = None
        self.pending.clear()
        self.unacked.clear()
        self.cache.clear()


class DigestEngine:
    """The digest buffers of one pipeline; thread-safe."""

    def __init__(self, digests: dict[int, DigestInfo]) -> None:
        self._lock = threading.Lock()
        self._digests = {did: _Digest(info) for did, info in digests.items()}
        self._cap = {did: max_samples(info) for did, info in digests.items()}

    def _get(self, digest_id: int) -> _Digest:
        d = self._digests.get(digest_id)
        if d is None:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND,
                                 f"{digest_id} is not a valid digest id")
        return d

    # -- configuration (Write / Read of DigestEntry) --------------------------------------

    def configure(self, update_type: int, entry: p4runtime_pb2.DigestEntry) -> None:
        Update = p4runtime_pb2.Update
        with self._lock:
            d = self._get(entry.digest_id)
            c = entry.config
            config = DigestConfig(c.max_timeout_ns, c.max_list_size, c.ack_timeout_ns)
            if min(config.max_timeout_ns, config.max_list_size, config.ack_timeout_ns) < 0:
                raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT,
                                     "DigestEntry config values must not be negative")
            if update_type == Update.INSERT:
                if d.config is not None:
                    raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS,
                                         f"Digest {entry.digest_id} already configured")
                d.config = config
            elif update_type == Update.MODIFY:
                if d.config is None:
                    raise P4RuntimeError(grpc.StatusCode.NOT_FOUND,
                                         f"Digest {entry.digest_id} not configured")
                d.config = config
            elif update_type == Update.DELETE:
                if d.config is None:
                    raise P4RuntimeError(grpc.StatusCode.NOT_FOUND,
                                         f"Digest {entry.digest_id} not configured")
                d.reset()
            else:
                raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT,
                                     "Invalid update type for DigestEntry")

    def read_config(self, digest_id: int) -> p4runtime_pb2.DigestEntry:
        if digest_id == 0:
            raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                                 "digest_id must be set when reading DigestEntry")
        with self._lock:
            d = self._get(digest_id)
            if d.config is None:
                raise P4RuntimeError(grpc.StatusCode.NOT_FOUND,
                                     f"Digest {digest_id} not configured")
            entry = p4runtime_pb2.DigestEntry(digest_id=digest_id)
            entry.config.max_timeout_ns = d.config.max_timeout_ns
            entry.config.max_list_size = d.config.max_list_size
            entry.config.ack_timeout_ns = d.config.ack_timeout_ns
            return entry

    # -- data path ------------------------------------------------------------------------

    def _send(self, d: _Digest, now_ns: int) -> p4runtime_pb2.DigestList:
        msg = p4runtime_pb2.DigestList(digest_id=d.info.id, list_id=d.next_list_id,
                                       timestamp=now_ns)
        for sample in d.pending:
            digest_data(d.info, sample, msg.data.add())
        assert d.config is not None
        if d.config.ack_timeout_ns > 0:
            d.unacked[d.next_list_id] = (list(d.pending), now_ns)
        d.next_list_id += 1
        d.pending.clear()
        return msg

    def add(self, digest_id: int, sample: Sample, now_ns: int) -> list[p4runtime_pb2.DigestList]:
        """Record one sample; return the lists that are due now."""
        with self._lock:
            d = self._digests.get(digest_id)
            if d is None or d.config is None:
                return []
            if d.config.ack_timeout_ns > 0:
                if sample in d.cache:
                    return []
                d.cache.add(sample)
            if not d.pending:
                d.first_pending_ns = now_ns
            d.pending.append(sample)
            full = (0 < d.config.max_list_size <= len(d.pending)
                    or len(d.pending) >= self._cap[digest_id])
            if full or d.config.max_timeout_ns == 0:
                return [self._send(d, now_ns)]
            return []

    def tick(self, now_ns: int) -> list[p4runtime_pb2.DigestList]:
        """Send the lists whose max_timeout_ns expired and expire unacked lists."""
        out = []
        with self._lock:
            for d in self._digests.values():
                if d.config is None:
                    continue
                if d.pending and now_ns - d.first_pending_ns >= d.config.max_timeout_ns:
                    out.append(self._send(d, now_ns))
                if d.config.ack_timeout_ns > 0:
                    expired = [lid for lid, (_, sent) in d.unacked.items()
                               if now_ns - sent >= d.config.ack_timeout_ns]
                    for lid in expired:
                        self._release(d, lid)
        return out

    def _release(self, d: _Digest, list_id: int) -> None:
        samples, _ = d.unacked.pop(list_id)
        for s in samples:
            d.cache.discard(s)

    def ack(self, digest_id: int, list_id: int) -> None:
        """A DigestListAck: forget the list's samples (unknown ids are ignored, as PI)."""
        with self._lock:
            d = self._digests.get(digest_id)
            if d is not None and list_id in d.unacked:
                self._release(d, list_id)

    def needs_ticks(self) -> bool:
        """Whether some configured digest has a timeout to enforce."""
        with self._lock:
            return any(d.config is not None and (d.config.max_timeout_ns or
                                                 d.config.ack_timeout_ns)
                       for d in self._digests.values())
