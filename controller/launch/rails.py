"""Whether each rank's rail is up: before a job starts and while it runs.

A rank's rail is the switch its NIC is cabled to. A switch that does not answer on its
P4Runtime port (its process is gone) carries no packet: a collective across it waits on TCP
retransmissions for minutes, then fails somewhere far from the cause. The launcher checks
every rail the job uses before it starts anything, refusing with the rail named, and watches
them while the job runs, stopping the job when one goes down.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from controller.launch.placement import Placement
from controller.topology.model import Topology

__all__ = ["RailDown", "RailWatch", "down_rails", "rank_switches", "switch_answers"]


@dataclass(frozen=True)
class RailDown:
    """A rail (or, without rails, a NIC's switch) that does not answer, and who uses it."""

    rail: int | None
    switch: str
    address: str
    ranks: tuple[int, ...]

    def text(self) -> str:
        """e.g. ``rail 1 is down (switch rail1 does not answer at 127.0.0.1:50052): ranks 1, 5 use it``."""
        what = f"rail {self.rail}" if self.rail is not None else f"switch {self.switch}"
        used = f"rank{'s' if len(self.ranks) > 1 else ''} {', '.join(map(str, self.ranks))}"
        return f"{what} is down (switch {self.switch} does not answer at {self.address}): {used} use{'' if len(self.ranks) > 1 else 's'} it"


def rank_switches(topo: Topology, placement: Placement) -> dict[int, str]:
    """The switch each rank's NIC is cabled to.

    >>> from controller.launch.placement import place
    >>> from controller.topology import rail_only
    >>> rank_switches(rail_only(2, 2), place(rail_only(2, 2), gpus=True))
    {0: 'rail0', 1: 'rail1', 2: 'rail0', 3: 'rail1'}
    """
    out = {}
    for slot in placement.ranks:
        for link in topo.links_of(slot.host):
            if str(link.end(slot.host).port) == slot.nic and topo.is_switch(link.other(slot.host).node):
                out[slot.rank] = link.other(slot.host).node
    return out


def switch_answers(address: str, timeout_s: float = 1.0) -> bool:
    """Whether something accepts a TCP connection at ``host:port``."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def down_rails(topo: Topology, placement: Placement,
               answers: Callable[[str], bool] = switch_answers) -> list[RailDown]:
    """The rails (switches) the job uses that do not answer, each with the ranks on it.

    >>> from controller.launch.placement import place
    >>> from dataclasses import replace
    >>> from controller.topology import rail_only
    >>> t = rail_only(2, 2)
    >>> t = replace(t, switches=tuple(replace(s, grpc=f"127.0.0.1:{50051 + i}") for i, s in enumerate(t.switches)))
    >>> [d.text() for d in down_rails(t, place(t, gpus=True), lambda a: not a.endswith("52"))]
    ['rail 1 is down (switch rail1 does not answer at 127.0.0.1:50052): ranks 1, 3 use it']
    """
    by_switch: dict[str, list[int]] = {}
    for rank, switch in rank_switches(topo, placement).items():
        by_switch.setdefault(switch, []).append(rank)
    out = []
    for name, ranks in by_switch.items():
        sw = topo.switch(name)
        if sw.grpc and not answers(sw.grpc):
            out.append(RailDown(sw.rail, name, sw.grpc, tuple(sorted(ranks))))
    return out


class RailWatch(threading.Thread):
    """Probes the job's rails every ``interval_s`` while the job runs; the first time one is
    down, records it (:attr:`down`) and calls ``on_down`` (which stops the job)."""

    def __init__(self, topo: Topology, placement: Placement, on_down: Callable[[Sequence[RailDown]], None],
                 interval_s: float = 1.0, answers: Callable[[str], bool] = switch_answers) -> None:
        super().__init__(daemon=True, name="rail-watch")
        self.topo, self.placement, self.on_down = topo, placement, on_down
        self.interval_s, self.answers = interval_s, answers
        self.down: list[RailDown] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.interval_s):
            down = down_rails(self.topo, self.placement, self.answers)
            if down:
                self.down = down
                self.on_down(down)
                return

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)

    def __enter__(self) -> RailWatch:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
