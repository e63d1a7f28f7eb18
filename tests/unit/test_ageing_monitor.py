"""BMv2's ageing sweeps under PI's buffer (:mod:`pybmv2.runtime.idle_timeouts`), pure: which
sweep reports an idle entry, the every-other-sweep repetition, the 100 ms batch."""

from __future__ import annotations

from typing import Any

from pybmv2.runtime.idle_timeouts import BUFFERING_US, AgeingMonitor


class _Table:
    def __init__(self, *entries: Any, support_timeout: bool = True) -> None:
        self._entries = list(entries)
        self.support_timeout = support_timeout

    def entries(self) -> list[Any]:
        return self._entries


class _Entry:
    def __init__(self, handle: int, ttl_ns: int, hit_us: int) -> None:
        self.handle, self.ttl_ns, self.hit_us = handle, ttl_ns, hit_us


def test_an_idle_entry_is_reported_every_other_sweep_until_it_is_hit() -> None:
    e = _Entry(1, 1_000_000_000, 0)
    tables: Any = {"flows": _Table(e), "plain": _Table(_Entry(9, 1_000_000, 0), support_timeout=False)}
    mon = AgeingMonitor()
    reported = [[x.handle for _, x in mon.sweep(tables, t * 1_000_000)] for t in range(1, 6)]
    assert reported == [[1], [], [1], [], [1]], "a table without support_timeout is never swept"
    e.hit_us = 5_500_000  # a hit: idle 0.5 s at the next sweep, 1.5 s at the one after
    assert mon.sweep(tables, 6_000_000) == []
    assert [x.handle for _, x in mon.sweep(tables, 7_000_000)] == [1]


def test_reports_wait_in_one_batch_for_pis_100_ms() -> None:
    a, b = _Entry(1, 1_000_000, 0), _Entry(2, 1_000_000, 0)
    tables: Any = {"flows": _Table(a), "egress": _Table(b)}
    mon = AgeingMonitor()
    mon.sweep(tables, 1_000_000)
    assert mon.take_due(1_000_000 + BUFFERING_US - 1) == []
    assert [(name, x.handle) for name, x in mon.take_due(1_000_000 + BUFFERING_US)] == [("flows", 1), ("egress", 2)]
    assert mon.take_due(5_000_000) == [] and mon.due_us is None
    mon.sweep(tables, 2_000_000)  # both left out: the last sweep reported them
    assert mon.due_us is None
    mon.reset()
    assert [x.handle for _, x in mon.sweep(tables, 3_000_000)] == [1, 2], "a new pipeline remembers nothing"


def test_a_sweep_in_chunks_reports_what_one_sweep_reports() -> None:
    """sweep_steps pauses every `chunk` entries (the device lets packets through there) and
    reports exactly what the whole sweep does."""
    def build() -> Any:
        return {"t": _Table(*(_Entry(h, 1_000_000_000, h % 3 * 1_000_000) for h in range(1, 11)))}

    whole = AgeingMonitor().sweep(build(), 2_500_000)
    mon = AgeingMonitor()
    steps = mon.sweep_steps(build(), 2_500_000, chunk=3)
    pauses = 0
    while True:
        try:
            next(steps)
            pauses += 1
        except StopIteration as done:
            chunked = done.value
            break
    assert pauses == 3, "10 entries, 3 at a time: 4 chunks, 3 pauses"
    assert [e.handle for _, e in chunked] == [e.handle for _, e in whole] != []
    assert mon.due_us == 2_600_000
