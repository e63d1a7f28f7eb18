"""Watches a Mininet network's shaped links during an interval: every sending interface's
root qdisc is sampled every ``period_s`` (bytes sent, packets and bytes queued) by one thread, over
rtnetlink (:mod:`qdisc_stats`), and the samples become a
:class:`~controller.experiments.link_rate.LinkUse`.

Each shaped interface is one link direction (htb on the sending side), in its node's
namespace: a host's shell, or the root namespace for the switches' ports. The thread runs
only inside :meth:`LinkMonitor.watch`, so a fabric pays nothing between intervals; how late
its own wake-ups were is kept as a cheap measure of the machine's scheduling delay.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from mlfabric_emulation.shaped_link import htb_burst

from controller.experiments.link_rate import LinkUse, QueueSample, link_use
from controller.qdisc_stats import QdiscReader

__all__ = ["LinkMonitor", "ShapedEnd"]

log = logging.getLogger(__name__)

#: seconds between samples: a few per collective, a few hundredths of a core on 2 cores
PERIOD_S = 0.05


@dataclass(frozen=True, slots=True)
class ShapedEnd:
    """One shaped interface: its node's namespace (a pid; None: the root namespace), its
    name, what the link is called in reports, and its rate in bits per second."""

    pid: int | None
    interface: str
    label: str
    rate_bps: float
    #: what htb may send at once: its burst (:func:`shaped_link.htb_burst`) and the frame that
    #: overdraws it (htb sends while it has any tokens left)
    burst_bytes: int = 15_000 + 1518


def _send_at_once(mtu: int) -> int:
    return htb_burst(mtu) + mtu + 18


def shaped_ends(net: object, extra: Iterable[object] = ()) -> list[ShapedEnd]:
    """The interfaces of ``net``'s links that were given a rate (``bw``, Mbit/s), and those of
    ``extra`` (a fabric's tunnel ends to other machines)."""
    out = []
    intfs = [intf for link in getattr(net, "links", ()) for intf in (link.intf1, link.intf2)]
    for intf in [*intfs, *extra]:
        bw = (getattr(intf, "params", None) or {}).get("bw")
        if bw:
            node = intf.node
            pid = int(node.pid) if getattr(node, "inNamespace", False) else None
            out.append(ShapedEnd(pid, intf.name, intf.name, float(bw) * 1e6,
                                 _send_at_once(int(getattr(intf, "mtu", 1500) or 1500))))
    return out


class LinkMonitor:
    """Samples the given shaped interfaces while :meth:`watch` runs."""

    def __init__(self, ends: list[ShapedEnd], period_s: float = PERIOD_S) -> None:
        self.ends = ends
        self.period_s = period_s

    @classmethod
    def of_network(cls, net: object, extra: Iterable[object] = ()) -> LinkMonitor | None:
        """The monitor of ``net``'s shaped links (and ``extra`` interfaces); None when none is shaped."""
        ends = shaped_ends(net, extra)
        return cls(ends) if ends else None

    @staticmethod
    def _sample(readers: dict[int | None, QdiscReader], by_ns: dict[int | None, list[ShapedEnd]],
                series: dict[str, list[QueueSample]]) -> None:
        for pid, ends in by_ns.items():
            now = time.monotonic()
            try:
                counters = readers[pid].read()
            except OSError:  # the host went away (a failed run): its links drop out
                continue
            for end in ends:
                c = counters.get(end.interface)
                if c is not None:
                    series[end.label].append(QueueSample(now, c.sent_bytes, c.qlen, c.backlog_bytes))

    @contextlib.contextmanager
    def watch(self) -> Iterator[list[LinkUse]]:
        """Samples during the ``with`` body; the yielded list holds the interval's LinkUse after it."""
        out: list[LinkUse] = []
        readers: dict[int | None, QdiscReader] = {}
        for pid in {e.pid for e in self.ends}:
            with contextlib.suppress(OSError):
                readers[pid] = QdiscReader(pid)
        ends = [e for e in self.ends if e.pid in readers]
        by_ns: dict[int | None, list[ShapedEnd]] = {}
        for end in ends:
            by_ns.setdefault(end.pid, []).append(end)
        series: dict[str, list[QueueSample]] = {e.label: [] for e in ends}
        stop = threading.Event()
        late: list[float] = []

        def run() -> None:
            due = time.monotonic()
            while True:
                self._sample(readers, by_ns, series)
                if stop.is_set():
                    return
                due += self.period_s
                stop.wait(max(0.0, due - time.monotonic()))
                if not stop.is_set():
                    late.append(max(0.0, time.monotonic() - due))
                    due = max(due, time.monotonic() - self.period_s)  # never race to catch up

        thread = threading.Thread(target=run, name="link-monitor", daemon=True)
        try:
            thread.start()
            yield out
        finally:
            stop.set()
            # a signal turned into KeyboardInterrupt can land inside start(), before the thread
            # ran: joining it would replace the interrupt with a RuntimeError (exit 1, not 130)
            if thread.ident is not None:
                thread.join()
            for reader in readers.values():
                reader.close()
        out.append(link_use(series, {e.label: e.rate_bps for e in ends}, bursts={e.label: e.burst_bytes for e in ends},
                            sched_delay_ms=round(1e3 * max(late), 3) if late else None))
