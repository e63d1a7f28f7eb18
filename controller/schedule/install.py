"""Install a schedule on a running optical fabric, every switch on one common epoch.

For each circuit switch (``ocs0``, ``ocs1``... = the schedule's circuits in order) and each
ToR: probe its clock (:mod:`controller.schedule.clock`), then replace what an earlier
schedule installed (circuits and slice windows; ToRs' slot windows and time-flow entries;
what a reconfiguration left), all under configuration version 0,
and set its clock so that its phase is the schedule's phase since ``epoch_us`` on the
controller's clock. The report gives each switch's skew bound: half the round trip of the
probe the offset came from.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from dataclasses import dataclass

from controller.dashboard import journal
from controller.dashboard.journal import wall_time_of
from controller.errors import ConfigError, MlfabricError
from controller.install import pipeline_schema
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.entities import TableRule, encode_rule, update
from controller.schedule.clock import controller_now_us, probe_clock
from controller.schedule.model import Schedule
from controller.schedule.ocs_rules import (
    CIRCUIT,
    CLOCK,
    SLICE_OF_PHASE,
    circuit_switch_rules,
    clock_rule,
)
from controller.schedule.tor_rules import SCHEDULED_TABLES, tor_schedule_rules
from controller.topology.model import Switch, Topology

__all__ = ["ClockReport", "check_fits", "circuit_switches", "install_schedule", "record_schedule", "stop_schedule"]


@dataclass(frozen=True)
class ClockReport:
    switch: str
    circuit: int
    offset_us: int
    skew_bound_us: float
    entries: int


def circuit_switches(topo: Topology) -> list[Switch]:
    """The fabric's circuit switches in schedule order (by the number in their name)."""
    ocs = [s for s in topo.switches if s.role == "ocs"]
    return sorted(ocs, key=lambda s: int("".join(c for c in s.name if c.isdigit()) or 0))


def check_fits(topo: Topology, schedule: Schedule) -> None:
    """``schedule`` is for as many circuit switches and racks as ``topo`` has; else a ConfigError."""
    ocs = circuit_switches(topo)
    if len(ocs) != len(schedule.circuits):
        raise ConfigError(schedule.source, "circuits", len(schedule.circuits),
                          f"the fabric {topo.name!r} has {len(ocs)} circuit switches")
    racks = topo.params.get("racks")
    if racks is not None and racks != schedule.racks:
        raise ConfigError(schedule.source, "racks", schedule.racks, f"the fabric {topo.name!r} has {racks} racks")


def _client(sw: Switch, election_id: int) -> P4RuntimeClient:
    if not sw.grpc:
        raise MlfabricError(f"switch {sw.name} has no gRPC address: run the emulation (mlfabric fabric up)")
    return P4RuntimeClient(sw.grpc, device_id=sw.device_id, election_id=election_id).connect()


def _clear(client: P4RuntimeClient, sw: Switch) -> None:
    schema, _ = pipeline_schema(sw.program)
    tables = SCHEDULED_TABLES if sw.role == "tor" else (CLOCK, SLICE_OF_PHASE, CIRCUIT)
    old = [r for t in tables for r in client.read_rules(schema, schema.table(t).id)]
    if old:
        client.write_rules(schema, "delete", old)


def _write(client: P4RuntimeClient, sw: Switch, rules: list[TableRule]) -> None:
    schema, _ = pipeline_schema(sw.program)
    _clear(client, sw)
    defaults = [update("modify", encode_rule(schema, r)) for r in rules if r.is_default]
    if defaults:
        client.write_checked(defaults)
    entries = [r for r in rules if not r.is_default]
    if entries:  # wire-encoded batches: a ToR's time-flow table has thousands of entries
        client.write_rules(schema, "insert", entries)


def install_schedule(topo: Topology, schedule: Schedule, *, routing: str = "direct",
                     epoch_us: float | None = None, probes: int = 16, hold: bool = False,
                     margin_us: int = 0, election_id: int = 1) -> tuple[float, list[ClockReport]]:
    """Install ``schedule`` on every circuit switch and ToR of ``topo`` (time-flow entries
    for ``routing``; ``hold``: the ToRs have calendar queues; ``margin_us``: they send
    nothing in the first and the last ``margin_us`` of a day); the epoch used and the
    reports, circuit switches first."""
    check_fits(topo, schedule)
    ocs = circuit_switches(topo)
    epoch = controller_now_us() if epoch_us is None else epoch_us
    tors = [s for s in topo.switches if s.role == "tor"]
    with contextlib.ExitStack() as stack:
        clients = {sw.name: stack.enter_context(_client(sw, election_id)) for sw in [*ocs, *tors]}
        # probe every clock first, one switch at a time, before the writes load the machine
        clocks = {sw.name: probe_clock(clients[sw.name], pipeline_schema(sw.program)[0], probes=probes)
                  for sw in [*ocs, *tors]}

        def circuit(u: int, sw: Switch) -> ClockReport:
            est = clocks[sw.name]
            clock = clock_rule(schedule, u, started_at_us=round(est.started_at_us), epoch_us=round(epoch))
            rules = circuit_switch_rules(schedule, u)
            _write(clients[sw.name], sw, [clock, *rules])
            return ClockReport(sw.name, u, int(clock.params.get("offset_us", 0)), est.uncertainty_us, len(rules))

        def tor(sw: Switch) -> ClockReport:
            est = clocks[sw.name]
            rules = tor_schedule_rules(topo, schedule, sw.name, routing=routing, hold=hold, margin_us=margin_us,
                                       started_at_us=round(est.started_at_us), epoch_us=round(epoch))
            _write(clients[sw.name], sw, rules)
            offset = next((int(r.params["offset_us"]) for r in rules if r.is_default and "offset_us" in r.params), 0)
            return ClockReport(sw.name, -1, offset, est.uncertainty_us, len(rules) - 1)

        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            futures = [pool.submit(circuit, u, sw) for u, sw in enumerate(ocs)]
            futures += [pool.submit(tor, sw) for sw in tors]
            reports = [f.result() for f in futures]
    record_schedule(schedule, epoch)
    return epoch, reports


def record_schedule(schedule: Schedule, epoch_us: float) -> None:
    """The journal's ``schedule`` event: ``schedule`` runs from ``epoch_us`` (controller clock)."""
    journal.record("schedule", name=schedule.name, schedule_kind=schedule.kind, slice_us=schedule.slice_us,
                   period_us=schedule.period_us, epoch_t=wall_time_of(epoch_us),
                   circuits=[{"slices": [list(m) for m in p.slices], "offset_us": p.offset_us}
                             for p in schedule.circuits])


def stop_schedule(topo: Topology, *, election_id: int = 1) -> list[str]:
    """Every circuit switch dark (windows and circuits deleted, clock pinned to slice 0) and
    every ToR unclocked with no time-flow entries: traffic between racks stops."""
    done = []
    for sw in [*circuit_switches(topo), *(s for s in topo.switches if s.role == "tor")]:
        with _client(sw, election_id) as client:
            if sw.role == "tor":
                reset = TableRule("TorIngress.clock", {}, "TorIngress.unclocked", {"version": 0, "hold": 0},
                                  is_default=True)
            else:
                reset = TableRule("OcsIngress.clock", {}, "OcsIngress.pin", {"version": 0, "slice": 0}, is_default=True)
            _write(client, sw, [reset])
        done.append(sw.name)
    return done
