"""Where a switch process's start-up time goes: named phases, from the process's start to
its first pipeline committed.

The daemon makes one :class:`StartupPhases` at ``main()`` and hands it to the switch
(``switch.startup``); each layer that does start-up work ends its phase with
:meth:`StartupPhases.lap` (the P4Runtime server when a pipeline arrives, the device when it
is verified, the native engine for its code generation, cache and ``dlopen``, the switch for
the initial table push). The device commits the first pipeline and logs the phases once::

    start-up to the first pipeline (ms): {"interpreter and pybmv2 imports": 181.2, ...}

``make bench`` reads that line from the switch's log.
"""

from __future__ import annotations

import json
import os
import time

__all__ = ["LOG_PREFIX", "StartupPhases", "process_start"]

#: the log line's start, followed by the phases as a JSON object of milliseconds
LOG_PREFIX = "start-up to the first pipeline (ms): "


def process_start() -> float:
    """``time.monotonic()`` at this process's start (to the kernel's clock tick, 10 ms).

    The kernel records the start in clock ticks since boot (``/proc/self/stat``); where
    that cannot be read, the time of the call.
    """
    now = time.monotonic()
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])
        since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        return now - max(0.0, since_boot - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return now


class StartupPhases:
    """Named phases of a start-up, each the seconds since the previous lap.

    Examples
    --------
    >>> clock = StartupPhases(origin=time.monotonic())
    >>> clock.lap("imports"); clock.lap("server up")
    >>> [name for name, _ in clock.phases]
    ['imports', 'server up']
    >>> clock.finish() is not None, clock.finish()   # reported once
    (True, None)
    """

    def __init__(self, origin: float | None = None) -> None:
        self._last = process_start() if origin is None else origin
        self.phases: list[tuple[str, float]] = []
        self.done = False

    def lap(self, name: str) -> None:
        """End phase ``name`` now (a name given twice adds up); nothing once finished."""
        if self.done:
            return
        now = time.monotonic()
        self.phases.append((name, now - self._last))
        self._last = now

    def milliseconds(self) -> dict[str, float]:
        """The phases so far, in order, in milliseconds."""
        out: dict[str, float] = {}
        for name, seconds in self.phases:
            out[name] = out.get(name, 0.0) + 1e3 * seconds
        return out

    def finish(self) -> str | None:
        """The log line of the phases the first time (later laps are ignored), else None."""
        if self.done:
            return None
        self.done = True
        return LOG_PREFIX + json.dumps({k: round(v, 2) for k, v in self.milliseconds().items()})

    @staticmethod
    def parse(text: str) -> dict[str, float] | None:
        """The phases of the first start-up line in a switch's log ``text`` (None: none)."""
        for line in text.splitlines():
            at = line.find(LOG_PREFIX)
            if at >= 0:
                phases = json.loads(line[at + len(LOG_PREFIX):])
                return {str(k): float(v) for k, v in phases.items()}
        return None
