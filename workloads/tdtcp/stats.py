"""What the sender and the receiver record over time, as JSON-ready columns (pure).

Times are ``time.monotonic()`` seconds: one clock for every network namespace of the
machine, the one the schedule's epoch and the ICMP receipt times are given on.

>>> from workloads.tdtcp.congestion import CongestionConfig, CongestionControl
>>> cc = CongestionControl("tdtcp", CongestionConfig(mss=1000))
>>> tl = Timeline()
>>> tl.record(1.0, cc, acked=0)
>>> cc.set_active(1)
True
>>> tl.record(1.01, cc, acked=5000)
>>> out = tl.to_json()
>>> out["t"], out["acked"], out["active_tdn"], out["tdn"]["1"]["cwnd"]
([1.0, 1.01], [0, 5000], [0, 1], [None, 10000])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workloads.tdtcp.congestion import CongestionControl

__all__ = ["COLUMNS", "DeliveryLog", "SwitchLog", "Timeline"]

#: the per-TDN columns of a timeline (see :meth:`~workloads.tdtcp.congestion.TdnState.snapshot`)
COLUMNS = ("cwnd", "ssthresh", "state", "in_flight", "srtt_ms", "rto_ms")


@dataclass
class Timeline:
    """Per sample: the time, the bytes cumulatively acknowledged, the active TDN, and each
    state's :data:`COLUMNS` (``None`` before that TDN was first used)."""

    t: list[float] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)
    active_tdn: list[int] = field(default_factory=list)
    tdn: dict[str, dict[str, list[Any]]] = field(default_factory=dict)

    def record(self, now: float, cc: CongestionControl, *, acked: int) -> None:
        """Append one sample of every state of ``cc``."""
        n = len(self.t)
        self.t.append(now)
        self.acked.append(acked)
        self.active_tdn.append(cc.active_tdn)
        for key, st in cc.states():
            cols = self.tdn.get(key)
            if cols is None:
                cols = self.tdn[key] = {c: [None] * n for c in COLUMNS}
            snap = st.snapshot()
            for c in COLUMNS:
                cols[c].append(snap[c])

    def to_json(self) -> dict[str, Any]:
        """The columns as one JSON object."""
        return {"t": self.t, "acked": self.acked, "active_tdn": self.active_tdn, "tdn": self.tdn}


@dataclass
class SwitchLog:
    """Every TDN announcement (``notifications``: receipt time, TDN id, source) and every one
    that changed the active TDN (``switches``), with the cwnd in force before and after."""

    notifications: list[tuple[float, int, str]] = field(default_factory=list)
    switches: list[dict[str, Any]] = field(default_factory=list)

    def record(self, *, received: float, applied: float, tdn: int, source: str, previous: int,
               cwnd_before: int, cwnd_after: int, changed: bool) -> None:
        """One announcement, applied at ``applied``."""
        self.notifications.append((received, tdn, source))
        if changed:
            self.switches.append({"t": received, "applied": applied, "from": previous, "to": tdn,
                                  "source": source, "cwnd_before": cwnd_before, "cwnd_after": cwnd_after})

    def to_json(self) -> dict[str, Any]:
        """``{"notifications": [[t, tdn, source], ...], "switches": [...]}``."""
        return {"notifications": [list(n) for n in self.notifications], "switches": self.switches}


@dataclass
class DeliveryLog:
    """Bytes delivered in order over time at a receiver, sampled every ``interval`` seconds
    (and at the end)."""

    interval: float
    t: list[float] = field(default_factory=list)
    delivered: list[int] = field(default_factory=list)
    _next: float = 0.0

    def tick(self, now: float, delivered: int) -> None:
        """Record a sample if one is due."""
        if now >= self._next:
            self.t.append(now)
            self.delivered.append(delivered)
            self._next = now + self.interval

    def close(self, now: float, delivered: int) -> None:
        """The final sample."""
        if not self.delivered or self.delivered[-1] != delivered:
            self.t.append(now)
            self.delivered.append(delivered)

    def to_json(self) -> dict[str, list[Any]]:
        """``{"t": [...], "bytes": [...]}``."""
        return {"t": self.t, "bytes": self.delivered}
