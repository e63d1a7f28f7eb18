"""Compile a Checkmate job into switch state: pure, a resolved job in, entries out.

For each mirrored leg of the job's ring (:func:`workloads.checkmate.capture_plan`) the
switch that the sender's NIC is cabled to gets

- a ``mirror_select`` entry: (sender IP, receiver IP, ToS tag + session, the receiver's
  mirror port) -> ``mirror_to_shadow(clone session)``;
- the job's clone session, whose one replica is the port toward the shadow's NIC;
- a ``mirror_rewrite`` entry: (that port, ToS tag + session) -> ``to_shadow(shadow MAC)``.

The shadow must be cabled to that switch: on a rail-only fabric, a shadow server with one
NIC per rail, like a GPU server, keeps every mirrored copy on the rail it was sent on.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from controller.errors import ConfigError
from controller.mirror.job import ResolvedJob
from controller.p4runtime.entities import Exact, TableRule, Ternary
from controller.topology.model import Topology
from workloads.checkmate.capture_plan import CaptureLeg, CapturePlan, capture_plan
from workloads.checkmate.tagging import TOS_MASK, clone_session_id, mirror_tos

__all__ = ["MIRROR_ACTION", "MIRROR_REWRITE", "MIRROR_SELECT", "REWRITE_ACTION", "MirrorLeg", "MirrorProgram", "SwitchMirror",
           "compile_mirror"]

MIRROR_SELECT = "RailIngress.mirror.mirror_select"
MIRROR_REWRITE = "RailEgress.mirror_copy.mirror_rewrite"
MIRROR_ACTION = "RailIngress.mirror.mirror_to_shadow"
REWRITE_ACTION = "RailEgress.mirror_copy.to_shadow"


@dataclass(frozen=True)
class MirrorLeg:
    """One mirrored TCP leg and where it is copied."""

    leg: CaptureLeg
    switch: str
    src_ip: str
    dst_ip: str
    dst_port: int
    shadow_port: int  # on ``switch``
    shadow_nic: str
    shadow_mac: str


@dataclass(frozen=True)
class SwitchMirror:
    """Everything one switch needs for one job."""

    switch: str
    clone_session: int
    replicas: tuple[tuple[int, int], ...]  # (egress port, instance)
    rules: tuple[TableRule, ...]


@dataclass(frozen=True)
class MirrorProgram:
    job: ResolvedJob
    plan: CapturePlan
    legs: tuple[MirrorLeg, ...]
    switches: tuple[SwitchMirror, ...]

    @property
    def switch_names(self) -> tuple[str, ...]:
        return tuple(s.switch for s in self.switches)


def _first_hop(topo: Topology, host: str, nic: str) -> tuple[str, int]:
    for lk in topo.links_of(host):
        end = lk.end(host)
        if str(end.port) == nic and topo.is_switch(lk.other(host).node):
            other = lk.other(host)
            return other.node, int(other.port)
    raise KeyError(f"NIC {host}:{nic} is not cabled to a switch")


def _shadow_port(topo: Topology, shadow: str, switch: str) -> tuple[int, str, str] | None:
    """(port on ``switch``, NIC name, MAC) of the shadow's NIC cabled to ``switch``."""
    host = topo.host(shadow)
    for lk in topo.links_of(shadow):
        if lk.other(shadow).node == switch:
            nic = host.nic(str(lk.end(shadow).port))
            return int(lk.other(shadow).port), nic.name, nic.mac
    return None


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def compile_mirror(job: ResolvedJob) -> MirrorProgram:
    """The switch state that mirrors ``job``'s reduced gradient to its shadow.

    Raises ConfigError (naming the job file, the shadow and the switch) when the shadow is
    not cabled to the switch a mirrored leg enters the fabric through.
    """
    spec, topo, layout = job.spec, job.topology, job.layout
    plan = capture_plan(layout, job.ring)
    tos = mirror_tos(spec.session)
    session = clone_session_id(spec.session)
    legs: list[MirrorLeg] = []
    for leg in plan.legs:
        sender, receiver = layout[leg.sender], layout[leg.receiver]
        host = job.servers[sender.server]
        nic = next(w for w in spec.workers if w.rank == sender.rank)
        nic_name = topo.host(host).rail_nic(nic.rail).name
        try:
            switch, _ = _first_hop(topo, host, nic_name)
        except KeyError as exc:
            raise ConfigError(spec.source, "workers", host, str(exc)) from None
        attach = _shadow_port(topo, spec.shadow, switch)
        if attach is None:
            raise ConfigError(spec.source, "shadow", spec.shadow,
                              f"shadow not attached to switch {switch}, which carries the mirrored leg "
                              f"rank {leg.sender} -> rank {leg.receiver}: give the shadow a NIC cabled to it")
        port, shadow_nic, shadow_mac = attach
        legs.append(MirrorLeg(leg, switch, sender.ip, receiver.ip, spec.mirror_port(leg.receiver),
                              port, shadow_nic, shadow_mac))
    switches: list[SwitchMirror] = []
    for name in dict.fromkeys(lg.switch for lg in legs):
        mine = [lg for lg in legs if lg.switch == name]
        rules = [TableRule(MIRROR_SELECT,
                           {"hdr.ipv4.src_addr": Exact(int(ipaddress.IPv4Address(lg.src_ip))),
                            "hdr.ipv4.dst_addr": Exact(int(ipaddress.IPv4Address(lg.dst_ip))),
                            "hdr.ipv4.diffserv": Ternary(tos, TOS_MASK),
                            "meta.l4_dst_port": Exact(lg.dst_port)},
                           MIRROR_ACTION, {"session": session}, priority=1)
                 for lg in mine]
        ports = sorted({lg.shadow_port for lg in mine})
        rules += [TableRule(MIRROR_REWRITE,
                            {"standard_metadata.egress_port": Exact(p),
                             "hdr.ipv4.diffserv": Ternary(tos, TOS_MASK)},
                            REWRITE_ACTION,
                            {"dmac": _mac(next(lg.shadow_mac for lg in mine if lg.shadow_port == p))},
                            priority=1)
                  for p in ports]
        switches.append(SwitchMirror(name, session, tuple((p, 1) for p in ports), tuple(rules)))
    return MirrorProgram(job, plan, tuple(legs), tuple(switches))
