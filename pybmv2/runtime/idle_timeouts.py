"""Idle timeouts as ``simple_switch_grpc`` 1.15.5 has them: BMv2's ageing monitor under PI's
idle-timeout buffer. Pure: entries and clock readings in, entries to report out
(:mod:`pybmv2.runtime.device` runs the sweeps on the switch's clock and sends the
notifications).

What BMv2 and PI do, and so what this does (recorded against ``simple_switch_grpc``, see
``tests/target/test_idle_timeouts.py``):

- an entry of a table with ``support_timeout`` may carry ``idle_timeout_ns``; BMv2 keeps it in
  whole milliseconds (``ttl_ns / 10**6``: a timeout under 1 ms never expires) and time-stamps
  the entry, in milliseconds, with the ingress time of every packet that hits it, and with
  the time its timeout is set: INSERT and every MODIFY (PI sets the timeout on each, even an
  unchanged one, although its own comment says it means to set it only on a change);
- every second (BMv2's default sweep interval, which PI does not change) a sweep lists the
  entries idle for at least their timeout. An entry listed in the previous sweep is left out,
  and the previous sweep's list is replaced by the entries reported this time; so an entry
  that stays idle is reported every other sweep;
- PI holds what a sweep reports for 100 ms and then sends one ``IdleTimeoutNotification``
  with every entry it gathered: table id, match, priority, controller metadata and
  idle_timeout_ns, no action;
- the switch never removes an entry: the controller decides;
- a read asking for ``time_since_last_hit`` gets ``idle_timeout_ns`` minus BMv2's remaining
  TTL (milliseconds): the idle time, at most the timeout; an entry without a timeout reads 0.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field

from pybmv2.tables import MatchTable, TableEntry

__all__ = ["BUFFERING_US", "SWEEP_CHUNK", "SWEEP_INTERVAL_US", "AgeingMonitor", "elapsed_ns", "is_idle"]

#: BMv2's AgeingMonitor default sweep interval
SWEEP_INTERVAL_US = 1_000_000
#: PI's IdleTimeoutBuffer::kDefaultMaxBufferingNs
BUFFERING_US = 100_000
#: entries a sweep looks at before it lets packets through (bench/idle_sweep.py: a whole
#: sweep of 65,536 entries takes about 10 ms, which the Python engine's forwarding waited)
SWEEP_CHUNK = 4_096


def _ms(ttl_ns: int) -> int:
    return ttl_ns // 1_000_000


def is_idle(entry: TableEntry, now_us: int) -> bool:
    """BMv2's sweep test: a timeout of at least 1 ms, and idle for at least that long.

    >>> e = TableEntry((1,), None, ttl_ns=1_000_000_000, hit_us=500_000)  # type: ignore[arg-type]
    >>> is_idle(e, 1_499_999), is_idle(e, 1_500_000)
    (False, True)
    >>> is_idle(TableEntry((1,), None, ttl_ns=999_999), 10**9)  # type: ignore[arg-type]
    False
    """
    timeout_ms = _ms(entry.ttl_ns)
    return timeout_ms > 0 and now_us // 1000 - entry.hit_us // 1000 >= timeout_ms


def elapsed_ns(ttl_ns: int, hit_us: int, now_us: int) -> int:
    """What PI answers for ``time_since_last_hit``: the timeout minus BMv2's remaining TTL.

    >>> elapsed_ns(2_500_000_000, 1_000_000, 1_804_400)  # 804 ms idle
    804000000
    >>> elapsed_ns(1_000_000_000, 0, 5_000_000), elapsed_ns(0, 0, 5_000_000)  # capped; no timeout
    (1000000000, 0)
    >>> elapsed_ns(500_000, 0, 5_000_000)  # BMv2 keeps 0 ms: "no timeout", UINT64_MAX remaining
    500001
    """
    if ttl_ns == 0:
        return 0
    timeout_ms, since_ms = _ms(ttl_ns), now_us // 1000 - hit_us // 1000
    if timeout_ms == 0:
        # BMv2 reports a remaining TTL of UINT64_MAX for an entry that does not age, and PI
        # reads it as int64 -1: idle_timeout_ns - (-1)
        return ttl_ns + 1
    remaining_ns = (timeout_ms - since_ms) * 1_000_000 if timeout_ms > since_ms else 0
    return ttl_ns - remaining_ns if ttl_ns >= remaining_ns else 0


@dataclass
class AgeingMonitor:
    """BMv2's sweeps (with their every-other-sweep repetition) and PI's 100 ms buffer.

    :meth:`sweep` runs one sweep at ``now_us`` over the tables with ``support_timeout`` and
    returns what it reports; :meth:`take_due` returns the buffered reports once the buffer's
    100 ms have passed since the first of them.
    """

    #: table name -> the handles the previous sweep reported
    previous: dict[str, set[int]] = field(default_factory=dict)
    #: (table name, entry) reported and not yet sent
    pending: list[tuple[str, TableEntry]] = field(default_factory=list)
    #: when the pending reports are due (µs), None: nothing pending
    due_us: int | None = None

    def reset(self) -> None:
        """A new pipeline: nothing reported, nothing pending (PI drains the old P4's first)."""
        self.previous.clear()
        self.pending.clear()
        self.due_us = None

    def sweep(self, tables: Mapping[str, MatchTable], now_us: int) -> list[tuple[str, TableEntry]]:
        """One sweep: the entries reported now, also added to the pending buffer."""
        steps = self.sweep_steps(tables, now_us)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value

    def sweep_steps(self, tables: Mapping[str, MatchTable], now_us: int, *,
                    chunk: int = SWEEP_CHUNK) -> Generator[None, None, list[tuple[str, TableEntry]]]:
        """:meth:`sweep` a ``chunk`` of entries at a time: the generator pauses after each
        chunk (its caller may let packets through meanwhile) and returns what it reports.
        Each table's entries are the ones it held when its turn came; an entry deleted while
        the sweep pauses may still be reported, as a notification may name an entry the
        controller deletes before it arrives."""
        out: list[tuple[str, TableEntry]] = []
        for name, table in tables.items():
            if not table.support_timeout:
                continue
            entries = list(table.entries())
            idle: list[TableEntry] = []
            for start in range(0, len(entries), chunk):
                if start:
                    yield
                idle += [e for e in entries[start:start + chunk] if is_idle(e, now_us)]
            before = self.previous.get(name, set())
            fresh = [e for e in idle if e.handle not in before]
            self.previous[name] = {e.handle for e in fresh}
            out += [(name, e) for e in fresh]
        if out:
            if self.due_us is None:
                self.due_us = now_us + BUFFERING_US
            self.pending += out
        return out

    def take_due(self, now_us: int) -> list[tuple[str, TableEntry]]:
        """The buffered reports if they are due at ``now_us`` (then the buffer is empty)."""
        if self.due_us is None or now_us < self.due_us:
            return []
        out, self.pending, self.due_us = self.pending, [], None
        return out
