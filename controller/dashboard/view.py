"""What the dashboard shows besides link rates, folded from the journal's events (pure: the
events and the time are the caller's): the fabric that runs now, the experiment's progress
and verdicts, the optical schedule's current slice, and a time line of what happened.

>>> v = FabricView()
>>> v.apply({"t": 10.0, "pid": 7, "kind": "run", "experiment": "rail-only", "folder": "r", "units": 2})
>>> v.apply({"t": 11.0, "pid": 7, "kind": "unit", "index": 1, "of": 2, "name": "rail-only"})
>>> v.apply({"t": 20.0, "pid": 7, "kind": "verdict", "comparison": "allreduce", "outcome": "even",
...          "decided": True, "why": ""})
>>> s = v.snapshot(21.0)
>>> s["run"]["unit"], [x["outcome"] for x in s["verdicts"]], [e["kind"] for e in s["timeline"]]
('1 of 2: rail-only', ['even'], ['run', 'unit', 'verdict'])
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FabricView", "current_slice"]

#: how many events the time line keeps
TIMELINE = 200

_TIMELINE_KINDS = {"fabric-up", "fabric-down", "run", "unit", "verdict", "run-end", "schedule", "reconfiguration"}


def current_slice(slices: int, slice_us: int, period_us: int, since_epoch_us: float, offset_us: int = 0,
                  one_shot: bool = False) -> int | None:
    """The slice a circuit switch of ``slices`` slices (phase ``offset_us``) is in
    ``since_epoch_us`` after the epoch (None: in a night, or before the epoch), as
    :meth:`Schedule.at` counts it.

    >>> current_slice(3, 1000, 1100, 1050), current_slice(3, 1000, 1100, 1150), current_slice(3, 1000, 1100, 3400)
    (None, 1, 0)
    """
    if since_epoch_us < 0 or slices <= 0 or period_us <= 0:
        return None
    if one_shot:
        return 0
    index, into = divmod((since_epoch_us - offset_us) % (slices * period_us), period_us)
    return int(index) if into < slice_us else None


@dataclass
class FabricView:
    """The journal folded: call :meth:`apply` per event, :meth:`snapshot` for the page."""

    fabric: Mapping[str, Any] | None = None  # the fabric-up event of the fabric that runs now
    fabric_seq: int = 0  # grows with every fabric that comes up: the page redraws
    run: dict[str, Any] | None = None
    verdicts: list[Mapping[str, Any]] = field(default_factory=list)
    schedule: Mapping[str, Any] | None = None
    timeline: deque[Mapping[str, Any]] = field(default_factory=lambda: deque(maxlen=TIMELINE))
    job: dict[str, str] = field(default_factory=dict)  # the latest of each job event, as a line
    _since: float = 0.0  # when the last fabric came or went

    def apply(self, event: Mapping[str, Any]) -> None:
        kind = event.get("kind")
        if kind == "fabric-up":
            # a fabric installs its schedule while it comes up: one from the same process since
            # the last fabric came or went is this fabric's
            s = self.schedule
            if s is None or s.get("pid") != event.get("pid") or float(s.get("t", 0)) < self._since:
                self.schedule = None
            self.fabric = event
            self.fabric_seq += 1
            self._since = float(event.get("t", 0))
        elif kind == "fabric-down":
            if self.fabric is not None and self.fabric.get("pid") == event.get("pid"):
                self.fabric, self.schedule = None, None
                self.fabric_seq += 1
            self._since = float(event.get("t", 0))
        elif kind == "run":
            self.run = {"experiment": event.get("experiment"), "folder": event.get("folder"),
                        "units": event.get("units"), "unit": None, "status": "running", "started": event.get("t")}
            self.verdicts, self.job = [], {}
        elif kind == "unit" and self.run is not None:
            self.run["unit"] = f"{event.get('index')} of {event.get('of')}: {event.get('name')}"
        elif kind == "verdict":
            self.verdicts.append({k: event.get(k) for k in ("comparison", "outcome", "decided", "why", "t")})
        elif kind == "run-end" and self.run is not None:
            self.run["status"] = event.get("status")
        elif kind == "schedule":
            self.schedule = event
        elif kind in _JOB_KINDS:
            self.job[str(kind)] = _job_text(event)
        if kind in _TIMELINE_KINDS:
            self.timeline.append(_brief(event))

    def fabric_owner(self) -> int | None:
        """The pid of the process that brought the current fabric up (to check it still runs)."""
        return None if self.fabric is None else self.fabric.get("pid")

    def drop_fabric(self) -> None:
        """The fabric's process is gone without saying so (killed): no fabric runs."""
        self.fabric, self.schedule = None, None
        self.fabric_seq += 1

    def snapshot(self, now: float) -> dict[str, Any]:
        topo = None if self.fabric is None else self.fabric.get("topology") or {}
        return {"fabric": None if topo is None else topo.get("name"), "fabric_seq": self.fabric_seq,
                "run": self.run, "verdicts": list(self.verdicts), "job": dict(self.job), "schedule": self._slices(now),
                "timeline": list(self.timeline)}

    def _slices(self, now: float) -> dict[str, Any] | None:
        s = self.schedule
        if s is None:
            return None
        since_us = (now - float(s.get("epoch_t", now))) * 1e6
        slice_us, period_us = int(s.get("slice_us", 0)), int(s.get("period_us", 0))
        now_in = []
        for plan in s.get("circuits") or []:
            slices = plan.get("slices") or []
            index = current_slice(len(slices), slice_us, period_us, since_us, int(plan.get("offset_us", 0)),
                                  one_shot=s.get("schedule_kind") == "one-shot")
            now_in.append({"slice": index, "matching": None if index is None else slices[index]})
        return {"name": s.get("name"), "kind": s.get("schedule_kind"), "slice_us": slice_us, "period_us": period_us,
                "circuits": now_in}


_JOB_KINDS = ("checkmate", "shadow", "aggregation")


def _job_text(event: Mapping[str, Any]) -> str:
    """A job's latest progress in one line.

    >>> _job_text({"kind": "shadow", "config": "mirror", "rep": 0, "iterations": 40, "applied": 40, "resyncs": 1})
    "Checkmate's shadow (mirror, repetition 0): replicated 40 of 40 iterations, 1 resyncs"
    >>> _job_text({"kind": "aggregation", "fabric": "rail-only", "op": "innet_allreduce", "kb": 1024, "ok": True,
    ...            "seconds": 0.5, "slots": 64, "counters": {"retransmitted": 3}})
    'in-network aggregation on rail-only: innet_allreduce of 1024 KiB in 0.500 s, a pool of 64 slots per switch; retransmitted 3'
    """
    e = event
    kind = e.get("kind")
    if kind == "checkmate":
        return (f"Checkmate ({e.get('config')}, repetition {e.get('rep')}): iteration {e.get('iteration')} of "
                f"{e.get('of')}{' mirrored to the shadow' if e.get('mirrored') else ''}"
                f"{'' if e.get('ok') else ', FAILED'}")
    if kind == "shadow":
        return (f"Checkmate's shadow ({e.get('config')}, repetition {e.get('rep')}): replicated {e.get('applied')} "
                f"of {e.get('iterations')} iterations, {e.get('resyncs')} resyncs")
    counters = "; ".join(f"{k} {v}" for k, v in sorted((e.get("counters") or {}).items()))
    took = f"in {e.get('seconds'):.3f} s" if e.get("ok") and e.get("seconds") is not None else "FAILED"
    return (f"in-network aggregation on {e.get('fabric')}: {e.get('op')} of {e.get('kb')} KiB {took}, a pool of "
            f"{e.get('slots')} slots per switch" + (f"; {counters}" if counters else ""))


def _brief(event: Mapping[str, Any]) -> dict[str, Any]:
    """An event for the time line: its kind, time and a one-line text."""
    kind = event.get("kind")
    text = {
        "fabric-up": lambda e: f"fabric {(e.get('topology') or {}).get('name')} up",
        "fabric-down": lambda e: f"fabric {e.get('name')} down",
        "run": lambda e: f"{e.get('experiment')} started",
        "unit": lambda e: f"unit {e.get('index')} of {e.get('of')}: {e.get('name')}",
        "verdict": lambda e: f"{e.get('comparison')}: {e.get('outcome')}",
        "run-end": lambda e: f"run ended: {e.get('status')}",
        "schedule": lambda e: f"schedule {e.get('name')} installed",
        "reconfiguration": lambda e: f"reconfiguration to {e.get('schedule')}: {e.get('phase')}",
    }[str(kind)](event)
    return {"kind": kind, "t": event.get("at", event.get("t")), "text": text,
            **({"phase": event.get("phase")} if kind == "reconfiguration" else {})}
