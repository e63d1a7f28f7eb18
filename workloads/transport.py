"""A small TCP mesh between the workers of one job, and concurrent exchanges over it.

:meth:`Mesh.start` connects it (:mod:`workloads.handshake`); frames, tags and timeouts are
those of :mod:`workloads.framing`. :meth:`Mesh.exchange` runs a step's sends, receives and
relays at once, in the calling thread (:mod:`workloads.exchange`: one poll loop, no thread per
transfer). After any error the mesh is *aborted*: every socket is shut down, so that the peers
waiting on this rank fail fast instead of each waiting for its own timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from workloads.config import WorkloadConfig
from workloads.errors import TransportError
from workloads.exchange import run_exchange
from workloads.framing import HEADER, PIECE_BYTES, Connection, make_tag
from workloads.handshake import connect_mesh
from workloads.nvlink import NvlinkClock
from workloads.plan import Rank

__all__ = ["HEADER", "PIECE_BYTES", "Connection", "Mesh", "make_tag"]

log = logging.getLogger(__name__)


class Mesh:
    """The connections of rank ``me``; see the module docstring. Use :meth:`start`."""

    def __init__(self, config: WorkloadConfig, me: Rank, conns: dict[int, Connection],
                 nvlink: NvlinkClock | None = None) -> None:
        self.config, self.me, self.conns = config, me, conns
        #: this GPU's NVLink (the connections to its server's GPUs pace on it)
        self.nvlink = nvlink or NvlinkClock(config.nvlink_bytes_per_s)
        self.layout = config.layout
        self.broken: str | None = None
        #: extra connections of mirrored legs (Checkmate), by peer: sent on / received from
        self.mirror_out: dict[int, Connection] = {}
        self.mirror_in: dict[int, Connection] = {}
        self._cid = 0

    # ------------------------------------------------------------ start-up

    @classmethod
    def start(cls, config: WorkloadConfig, rank: int) -> Mesh:
        """Listen, connect to every mesh peer and return when all are connected.

        Raises TransportError naming the peers that could not be reached within
        ``config.start_timeout_s``.
        """
        clock = NvlinkClock(config.nvlink_bytes_per_s)
        return cls(config, config.layout[rank], connect_mesh(config, rank, clock), clock)

    # ------------------------------------------------------------ data

    def next_cid(self) -> int:
        """A new collective call id; every rank makes the same calls in the same order."""
        self._cid += 1
        return self._cid

    def set_cid(self, cid: int) -> None:
        """Make the next collective call id ``cid + 1`` (every rank does the same), so that
        frame tags say which training iteration they belong to."""
        self._cid = cid

    def conn(self, peer: int, mirrored: str = "") -> Connection:
        """The connection to ``peer``; with ``mirrored`` ``"out"`` or ``"in"``, the mirrored
        leg's own connection to or from it."""
        if mirrored:
            table = self.mirror_out if mirrored == "out" else self.mirror_in
            if peer not in table:
                raise TransportError(f"rank {self.me.rank}: no mirrored connection {mirrored} "
                                     f"{'to' if mirrored == 'out' else 'from'} rank {peer}")
            return table[peer]
        try:
            return self.conns[peer]
        except KeyError:
            p = self.layout[peer]
            raise TransportError(
                f"rank {self.me.rank}: no connection to rank {peer} (server {p.server}, rail {p.rail}, "
                f"{p.ip}): mesh is {self.config.mesh!r}; cross-rail peers need mesh 'full' (fat-tree)"
            ) from None

    def require(self, peers: Iterable[int], what: str) -> None:
        """Fail before any I/O unless every peer of ``what`` is connected and the mesh is whole."""
        if self.broken is not None:
            raise TransportError(f"mesh unusable after an earlier error: {self.broken}")
        for p in sorted(peers):
            try:
                self.conn(p)
            except TransportError as exc:
                raise TransportError(f"{what}: {exc}") from None

    def send(self, peer: int, tag: int, buf: Any, mirrored: bool = False) -> None:
        self.conn(peer, "out" if mirrored else "").send_frame(tag, buf)

    def recv_into(self, peer: int, tag: int, out: Any, mirrored: bool = False) -> None:
        self.conn(peer, "in" if mirrored else "").recv_frame_into(tag, out)

    def forward(self, src: int, dst: int, tag: int, mirrored: bool = False) -> None:
        """Relay one frame from ``src`` to ``dst`` as it arrives, piece by piece (PXN); with
        ``mirrored``, onto the mirrored leg's connection to ``dst``."""
        a, b = self.conn(src), self.conn(dst, "out" if mirrored else "")
        left = a.recv_header(tag)
        b.send_all(memoryview(HEADER.pack(tag, left)))
        view = memoryview(bytearray(min(left, PIECE_BYTES)))
        while left:
            n = a.recv_some(view[:min(left, PIECE_BYTES)], f"relayed frame {tag:#x}")
            b.send_all(view[:n])
            left -= n

    def exchange(self, sends: Sequence[tuple[Any, ...]] = (),
                 recvs: Sequence[tuple[Any, ...]] = (),
                 forwards: Sequence[tuple[Any, ...]] = ()) -> None:
        """Run sends ``(peer, tag, buf)``, receives ``(peer, tag, out)`` and relays
        ``(src, dst, tag)`` all at once, in this thread (:func:`workloads.exchange.run_exchange`);
        return when all are done. Each may carry a fourth item, ``mirrored``: then it uses
        the mirrored leg's connection.

        The first failure aborts the mesh (so that the peers fail fast) and is raised.
        """
        if self.broken is not None:
            raise TransportError(f"mesh unusable after an earlier error: {self.broken}")
        if not (sends or recvs or forwards):
            return

        def mirrored(item: tuple[Any, ...]) -> bool:
            return bool(item[3]) if len(item) > 3 else False

        try:
            run_exchange([(self.conn(s[0], "out" if mirrored(s) else ""), s[1], s[2]) for s in sends],
                         [(self.conn(r[0], "in" if mirrored(r) else ""), r[1], r[2]) for r in recvs],
                         [(self.conn(f[0]), self.conn(f[1], "out" if mirrored(f) else ""), f[2]) for f in forwards],
                         self.config.timeout_s)
        except TransportError as exc:
            self.abort(str(exc))
            raise

    # ------------------------------------------------------------ teardown

    def abort(self, reason: str) -> None:
        """Shut every connection down (unblocking all threads); the mesh is unusable after."""
        if self.broken is None:
            self.broken = reason
            log.warning("rank %d: aborting the mesh: %s", self.me.rank, reason)
        for c in self._all_conns():
            c.shutdown(self.broken)

    def _all_conns(self) -> list[Connection]:
        return [*self.conns.values(), *self.mirror_out.values(), *self.mirror_in.values()]

    def close(self) -> None:
        for c in self._all_conns():
            c.close()

    def __enter__(self) -> Mesh:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
