"""Carry out a consistent reconfiguration on a running optical fabric (the protocol is
:mod:`controller.reconfigure.plan`'s): prepare and commit in one write per switch (the
commit is inert until the cut), wait for the new epoch, finish, collect the old entries;
scrub the new version everywhere if a switch rejects its part.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from controller.dashboard import journal
from controller.dashboard.journal import wall_time_of
from controller.errors import MlfabricError, ReconfigurationError
from controller.reconfigure.plan import FlipTimes, commit_rules, flip_times, prepare_rules
from controller.reconfigure.session import FabricSession, LiveSwitch
from controller.schedule.clock import controller_now_us
from controller.schedule.install import check_fits, record_schedule
from controller.schedule.model import Schedule
from controller.topology.model import Topology

__all__ = ["Reconfiguration", "SwitchReport", "reconfigure"]

#: the default lead from the writes to the cut: a base and a share per entry written. The
#: share is measured: the 4 ToRs of opera-4x3 (352,024 entries) took 45 s to commit on a
#: 2-core machine, about 130 us per entry with the switches sharing the cores
LEAD_US = 100_000
LEAD_US_PER_ENTRY = 150


@dataclass(frozen=True)
class SwitchReport:
    switch: str
    role: str
    prepared: int  # entries the prepare wrote
    acked_ms: float  # the commit's acknowledgement, after the call
    slack_ms: float  # how long before the cut it came (negative: late)


@dataclass(frozen=True)
class Reconfiguration:
    """What a reconfiguration did, times in ms after the call (the flip times in µs on the
    controller's clock)."""

    schedule: str
    version: int
    times: FlipTimes
    probed_ms: float  # connecting and surveying the switches (0 when the session was open)
    committed_ms: float  # the last switch's acknowledgement of the new configuration and its flip
    finished_ms: float | None  # the new clocks are the default actions, the transient entries gone
    collected_ms: float | None  # the old configuration's entries deleted
    worst_skew_us: float
    switches: tuple[SwitchReport, ...]
    finished_earlier: tuple[str, ...] = ()  # switches left mid-reconfiguration by an earlier run

    @property
    def late(self) -> list[str]:
        return [r.switch for r in self.switches if r.slack_ms < 0]


def _ms_since(t0: float) -> float:
    return (controller_now_us() - t0) / 1000


def reconfigure(topo: Topology, schedule: Schedule, *, routing: str = "direct", guard_us: int | None = None,
                margin_us: int = 0, lead_us: int | None = None, probes: int = 8, finish: bool = True,
                election_id: int = 1, session: FabricSession | None = None,
                progress: Callable[[str], None] | None = None) -> Reconfiguration:
    """Move the running fabric ``topo`` to ``schedule`` with no packet sent into a circuit
    under the other configuration's matching. ``guard_us`` (default: 2 ms plus twice the
    worst clock skew, rounded up to a ms) separates the cut from the new epoch; ``lead_us``
    is the time the commit has to reach every switch before the cut; ``margin_us``: the
    ToRs send nothing in the first and the last ``margin_us`` of a day (see
    :mod:`controller.schedule.timeflow`). Every switch gets the new configuration and its
    flip in one write; the cut is ``lead_us`` after the call's survey, time for every write
    to land and, should a switch reject its part, for the rollback (default: 100 ms and
    150 µs per entry written). ``session``: an open :class:`FabricSession` to use
    (a long-lived controller's); by default one is opened for this call."""
    t0 = controller_now_us()
    check_fits(topo, schedule)
    if session is None:
        with FabricSession(topo, election_id=election_id, probes=probes) as own:
            return _run(own, schedule, t0, routing=routing, guard_us=guard_us, margin_us=margin_us,
                        lead_us=lead_us, finish=finish, progress=progress)
    return _run(session, schedule, t0, routing=routing, guard_us=guard_us, margin_us=margin_us, lead_us=lead_us,
                finish=finish, progress=progress)


def _run(session: FabricSession, schedule: Schedule, t0: float, *, routing: str, guard_us: int | None,
         margin_us: int, lead_us: int | None, finish: bool, progress: Callable[[str], None] | None) -> Reconfiguration:
    say = progress or (lambda _: None)
    topo, live = session.topo, session.switches
    probed = _ms_since(t0)
    version = 1 - session.version
    skew = session.worst_skew_us
    guard = guard_us if guard_us is not None else -(-(2000 + 2 * int(skew)) // 1000) * 1000
    say(f"surveyed {len(live)} switches in {probed:.0f} ms (worst skew {skew:.0f} us); preparing version {version}")

    # Prepare and commit travel in one write per switch: the commit is inert until the cut,
    # so a rejection anywhere is undone everywhere before any switch flips.
    prepares = {x.sw.name: prepare_rules(topo, x.sw, schedule, circuit=x.circuit, version=version, routing=routing,
                                         margin_us=margin_us) for x in live}
    lead = lead_us if lead_us is not None else LEAD_US + LEAD_US_PER_ENTRY * sum(map(len, prepares.values()))
    times = flip_times(controller_now_us(), lead_us=lead, guard_us=guard)
    acks: dict[str, float] = {}

    def write(x: LiveSwitch) -> int:
        commit = commit_rules(topo, x.sw, schedule, circuit=x.circuit, version=version,
                              started_at_us=x.clock.started_at_us if x.clock else 0.0, times=times, hold=session.hold)
        x.write([*prepares[x.sw.name], *commit])
        acks[x.sw.name] = controller_now_us()
        return len(prepares[x.sw.name])

    try:
        prepared = session.parallel(write)
    except BaseException as exc:
        _rollback(session, version)
        journal.record("reconfiguration", phase="rollback", schedule=schedule.name, version=version)
        late = controller_now_us() - times.cut_us
        when = (f"after the cut, {late / 1000:.0f} ms too late: traffic may have been disrupted meanwhile "
                "(raise --lead-us)") if late > 0 else "before the cut"
        if isinstance(exc, MlfabricError):
            raise ReconfigurationError(f"{exc}; rolled back on all {len(live)} switches {when}: "
                                       "the running configuration is unchanged") from None
        raise
    committed_ms = _ms_since(t0)
    session.version = version
    journal.record("reconfiguration", phase="commit", schedule=schedule.name, version=version)
    journal.record("reconfiguration", phase="cut", schedule=schedule.name, version=version,
                   at=wall_time_of(times.cut_us))
    record_schedule(schedule, times.epoch_us)
    say(f"committed on {len(live)} switches in {committed_ms:.0f} ms; the fabric flips at the cut, "
        f"{(times.cut_us - controller_now_us()) / 1000:.0f} ms from now")
    finished_ms = collected_ms = None
    if finish:
        wait = (times.epoch_us - controller_now_us()) / 1e6 + 0.002
        if wait > 0:
            time.sleep(wait)
        session.parallel(lambda x: x.finish())
        finished_ms = _ms_since(t0)
        journal.record("reconfiguration", phase="finish", schedule=schedule.name, version=version)
        say(f"finished at {finished_ms:.0f} ms; deleting the old configuration's entries")
        session.parallel(lambda x: x.collect(version))
        collected_ms = _ms_since(t0)
        journal.record("reconfiguration", phase="clean-up", schedule=schedule.name, version=version)
    reports = tuple(SwitchReport(x.sw.name, x.sw.role, n, (acks[x.sw.name] - t0) / 1000,
                                 (times.cut_us - acks[x.sw.name]) / 1000)
                    for x, n in zip(live, prepared, strict=True))
    earlier, session.finished_earlier = session.finished_earlier, ()
    return Reconfiguration(schedule.name, version, times, probed, committed_ms, finished_ms,
                           collected_ms, skew, reports, earlier)


def _rollback(session: FabricSession, version: int) -> None:
    """Scrub ``version`` everywhere; a switch that cannot be reached is named, not skipped silently."""
    def scrub(x: LiveSwitch) -> str | None:
        try:
            x.scrub(version)
        except MlfabricError as exc:
            return f"{x.sw.name}: {exc}"
        return None

    problems: Sequence[str] = [p for p in session.parallel(scrub) if p]
    if problems:
        raise ReconfigurationError("rollback incomplete, these switches keep part of the new configuration: "
                                   + "; ".join(problems))
