"""Install a schedule on a running optical fabric's circuit switches, on one common epoch.

For each circuit switch (``ocs0``, ``ocs1``... = the schedule's circuits in order): probe its
clock (:mod:`controller.schedule.clock`), then replace its slice windows and circuits and
set its clock so that its phase is the schedule's phase since ``epoch_us`` on the
controller's clock. The report gives each switch's skew bound: half the round trip of the
probe the offset came from.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.errors import ConfigError, MlfabricError
from controller.install import _schema
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.entities import TableRule, encode_rule, update
from controller.schedule.clock import controller_now_us, probe_clock
from controller.schedule.model import Schedule
from controller.schedule.ocs_rules import CIRCUIT, SLICE_OF_PHASE, circuit_switch_rules, clock_rule
from controller.topology.model import Switch, Topology

__all__ = ["ClockReport", "circuit_switches", "install_schedule", "stop_schedule"]


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


def _client(sw: Switch, election_id: int) -> P4RuntimeClient:
    if not sw.grpc:
        raise MlfabricError(f"switch {sw.name} has no gRPC address: run the emulation (mlfabric fabric up)")
    return P4RuntimeClient(sw.grpc, device_id=sw.device_id, election_id=election_id).connect()


def _clear(client: P4RuntimeClient, sw: Switch) -> None:
    schema, _ = _schema(sw.program)
    ups = [update("delete", e) for t in (SLICE_OF_PHASE, CIRCUIT)
           for e in client.read_table_entries(schema.table(t).id)]
    if ups:
        client.write_checked(ups)


def install_schedule(topo: Topology, schedule: Schedule, *, epoch_us: float | None = None, probes: int = 16,
                     election_id: int = 1) -> tuple[float, list[ClockReport]]:
    """Install ``schedule`` on every circuit switch of ``topo``; the epoch used and the reports."""
    ocs = circuit_switches(topo)
    if len(ocs) != len(schedule.circuits):
        raise ConfigError(schedule.source, "circuits", len(schedule.circuits),
                          f"the fabric {topo.name!r} has {len(ocs)} circuit switches")
    racks = topo.params.get("racks")
    if racks is not None and racks != schedule.racks:
        raise ConfigError(schedule.source, "racks", schedule.racks, f"the fabric {topo.name!r} has {racks} racks")
    epoch = controller_now_us() if epoch_us is None else epoch_us
    reports = []
    for u, sw in enumerate(ocs):
        schema, _ = _schema(sw.program)
        with _client(sw, election_id) as client:
            est = probe_clock(client, schema, probes=probes)
            clock = clock_rule(schedule, u, started_at_us=round(est.started_at_us), epoch_us=round(epoch))
            rules: list[TableRule] = circuit_switch_rules(schedule, u)
            _clear(client, sw)
            client.write_checked([update("modify", encode_rule(schema, clock))]
                                 + [update("insert", encode_rule(schema, r)) for r in rules])
        reports.append(ClockReport(sw.name, u, int(clock.params.get("offset_us", 0)), est.uncertainty_us,
                                   len(rules)))
    return epoch, reports


def stop_schedule(topo: Topology, *, election_id: int = 1) -> list[str]:
    """Every circuit switch dark: its windows and circuits deleted, its clock pinned to slice 0."""
    done = []
    for sw in circuit_switches(topo):
        schema, _ = _schema(sw.program)
        with _client(sw, election_id) as client:
            _clear(client, sw)
            pin = TableRule("OcsIngress.clock", {}, "OcsIngress.pin", {"slice": 0}, is_default=True)
            client.write_checked([update("modify", encode_rule(schema, pin))])
        done.append(sw.name)
    return done
