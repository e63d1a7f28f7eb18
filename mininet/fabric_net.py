"""Build a Mininet network from a topology file, with P4 switches and rules installed.

:class:`EmulatedFabric` is a context manager: entering it creates one Mininet host per
server (one interface per NIC, addresses and MACs from the topology), one switch process
per switch (Python target or BMv2, started in parallel), links shaped with htb to their
rates, then loads every pipeline and installs the compiled rules; leaving it tears all of
it down, also after an error. While it runs, the topology with the switches' gRPC
addresses is published for the CLI (``mlfabric rules show rail0`` works against it), with
how to look into the switches (:class:`controller.live_fabric.FabricAccess`): their logs
(``log_dir/SWITCH.log``), pcaps (``pcap_dir/SWITCH-ethN_in.pcap``, ``_out.pcap``) and, on
BMv2, their Thrift ports (9090, 9091... in the order of the topology's switches).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from mininet.log import setLogLevel
from mininet.net import Mininet
from mlfabric_emulation.batched_links import BatchedLink, LinkBatch
from mlfabric_emulation.host_config import (
    ip_batched,
    prepare_commands,
    run_parallel,
    static_arp_commands,
)
from mlfabric_emulation.p4_switch_nodes import P4TargetSwitch
from mlfabric_emulation.shaped_link import ShapedIntf, ShapedLink
from mlfabric_emulation.teardown import stop_network

from controller.bmv2_thrift import assign_thrift_ports, thrift_support
from controller.cli.switch_args import current_fabric_path
from controller.cluster.tunnels import TunnelEnd, check_underlay_mtu, tunnel_commands
from controller.dashboard import journal
from controller.errors import EmulationError
from controller.install import InstallOptions, install_fabric
from controller.live_fabric import PARAM, FabricAccess
from controller.netstate import NetRecord, interface_owner
from controller.readiness import free_tcp_port
from controller.routing.topoopt_routes import host_commands
from controller.schedule.install import ClockReport, install_schedule
from controller.schedule.model import Schedule
from controller.topology import dump_topology, require_valid
from controller.topology.generators import switch_mac
from controller.topology.loader import topology_to_dict
from controller.topology.model import ETHERNET_MTU, Topology
from controller.topology.naming import switch_intf_name
from workloads.aggregation.wire import service_address

__all__ = ["EmulatedFabric", "FabricTimings", "check_free", "interface_names", "switch_intf_name"]

log = logging.getLogger(__name__)
#: Mininet's logger prints through its own handler; passed on to the root logger as well (the
#: CLI configures one), every line of its CLI would print twice
logging.getLogger("mininet").propagate = False

#: policy-routing tables for "traffic from NIC r leaves through NIC r" are 100 + r
RAIL_TABLE_BASE = 100


@dataclasses.dataclass(slots=True)
class FabricTimings:
    build_s: float = 0.0
    switches_s: float = 0.0
    hosts_s: float = 0.0
    rules_s: float = 0.0
    teardown_s: float = 0.0

    @property
    def bring_up_s(self) -> float:
        return self.build_s + self.switches_s + self.hosts_s + self.rules_s


def _intf_name(host: str, nic: str) -> str:
    return f"{host}-{nic}"


def interface_names(topo: Topology, only: Collection[str] | None = None) -> list[str]:
    """The switches' ports: the fabric's interfaces in the root namespace (of the switches
    in ``only``, where given: one machine's part of a fabric)."""
    return [switch_intf_name(ep.node, ep.port) for lk in topo.links for ep in (lk.a, lk.b)
            if topo.is_switch(ep.node) and (only is None or ep.node in only)]


def check_free(topo: Topology, only: Collection[str] | None = None) -> None:
    """Refuse to start over a fabric that holds ``topo``'s interface names (Mininet would fail
    half-way with RTNETLINK's "File exists"), naming who holds them. Experiments call it
    before they make their results folder. With ``only``, the interfaces of those nodes."""
    for lk in topo.links:
        for ep in (lk.a, lk.b):
            if only is not None and ep.node not in only:
                continue
            name = switch_intf_name(ep.node, ep.port) if topo.is_switch(ep.node) else _intf_name(ep.node, str(ep.port))
            if Path(f"/sys/class/net/{name}").exists():
                raise EmulationError(f"cannot start {topo.name}: interface {name} exists; {interface_owner(name)}")


def _route_mtu(address: str) -> tuple[str, int]:
    """The interface this machine reaches ``address`` through, and its MTU."""
    out = subprocess.run(["ip", "-j", "route", "get", address], capture_output=True, text=True)
    try:
        dev = json.loads(out.stdout)[0]["dev"]
        return dev, int(Path(f"/sys/class/net/{dev}/mtu").read_text())
    except (ValueError, IndexError, KeyError, OSError):
        raise EmulationError(f"no route to the tunnel address {address}: {out.stderr.strip()}") from None


class EmulatedFabric:
    """A running emulation of ``topo`` (see the module docstring)."""

    def __init__(self, topo: Topology, *, target: str = "python", shape: bool = True,
                 source_routing: bool = False, log_dir: Path | None = None, publish: bool = True,
                 install: bool = True, switch_args: tuple[str, ...] = (),
                 schedule: Schedule | None = None, routing: str = "direct",
                 calendar_queues: bool = False, margin_us: int = 0,
                 switch_args_of: Mapping[str, tuple[str, ...]] | None = None,
                 pcap_dir: Path | None = None, log_level: str = "info", run_dir: Path | None = None,
                 engine: str | None = None, frame_skbs: bool = False, super_frames: int = 0,
                 only: Collection[str] | None = None, tunnels: Sequence[TunnelEnd] = (),
                 grpc_host: str = "127.0.0.1", record_journal: bool = True) -> None:
        self.topo = require_valid(topo, topo.name)
        #: one machine's part of a fabric spread over several (:mod:`cluster_fabric`): the
        #: nodes it runs (None: all) and its ends of the links to other machines' nodes
        self.only = None if only is None else frozenset(only)
        self.tunnels = tuple(tunnels)
        #: the tunnel ends' interfaces once made
        self.tunnel_intfs: list[ShapedIntf] = []
        #: the address the switches' gRPC servers listen on (a cluster's: the machine's)
        self.grpc_host = grpc_host
        self.record_journal = record_journal
        if super_frames and target != "python":
            raise EmulationError("super-packets are a Python-target extension (mlfabric-switch --super-packets): "
                                 f"{target} takes frames only (leave super_frames 0)")
        if super_frames and frame_skbs:
            raise EmulationError("super_frames and frame_skbs contradict: one asks TCP for super-packets, the "
                                 "other for one frame per packet")
        if super_frames < 0:
            raise EmulationError(f"super_frames must be >= 0 (0: frames only), got {super_frames}")
        #: frames per TCP super-packet that hosts send and switches forward whole (0: frames only)
        self.super_frames = super_frames
        if super_frames:
            switch_args = (*switch_args, "--super-packets")
        if calendar_queues and target != "python":
            raise EmulationError("calendar queues are a Python-target extension: on BMv2 a packet whose "
                                 "slot has not come is dropped at the ToR (leave calendar_queues off)")
        #: ToRs hold packets until their slot (the Python target's --calendar-queue)
        self.calendar_queues = calendar_queues
        self.routing = routing
        #: ToRs send nothing in the first and the last margin_us of a day (latency and skew)
        self.margin_us = margin_us
        if calendar_queues:
            switch_args = (*switch_args, "--calendar-queue", "release_us")
        #: an optical fabric's schedule, installed on its circuit switches after the rules
        self.schedule = schedule
        self.schedule_epoch_us: float | None = None
        self.clock_reports: list[ClockReport] = []
        self.target = target
        if engine is not None and target != "python":
            raise EmulationError(f"--engine {engine} is an option of the Python target, not of {target}")
        #: the Python target's packet engine (None: mlfabric-switch's default, auto)
        self.engine = engine
        self.shape = shape
        #: hosts' TCP hands their qdiscs one frame per packet (:func:`host_config.prepare_commands`)
        self.frame_skbs = frame_skbs
        #: make traffic sourced from NIC r's address leave through NIC r (the fat-tree's
        #: direct cross-rail path); without it the kernel picks the NIC by destination
        self.source_routing = source_routing
        #: each switch's log (SWITCH.log), at log_level; and its per-port pcaps
        self.log_dir = log_dir
        self.log_level = log_level
        self.pcap_dir = pcap_dir
        #: the folder holding both, published for `fabric status`
        self.run_dir = run_dir
        #: BMv2's Thrift port per switch (assigned at start)
        self.thrift_ports: dict[str, int] = {}
        self.publish = publish
        self.install = install
        #: extra command-line options for every switch process (e.g. ``--queue-depth``)
        self.switch_args = switch_args
        #: more target arguments for single switches (e.g. --port-delay on one circuit switch)
        self.switch_args_of = dict(switch_args_of or {})
        self.timings = FabricTimings()
        self.net: Mininet | None = None
        self.live: Topology | None = None
        self._record: NetRecord | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> EmulatedFabric:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _link_delays(self) -> dict[str, tuple[str, ...]]:
        """Per switch, the Python target's arguments that give the links their ``delay_us``:
        each switch end delays what it transmits, and a switch facing a host also delays what
        it receives from it. BMv2 (and this kernel, without netem) cannot: refused by name."""
        out: dict[str, list[str]] = {}
        for i, lk in enumerate(self.topo.links):
            if not lk.delay_us:
                continue
            if self.target != "python":
                raise EmulationError(f"{self.topo.name}: links[{i}] ({lk.a} - {lk.b}) has delay_us {lk.delay_us:g}: "
                                     "BMv2 has no per-port delay and this kernel no netem; use --target python")
            switches = [ep for ep in (lk.a, lk.b) if self.topo.is_switch(ep.node)]
            if not switches:
                raise EmulationError(f"{self.topo.name}: links[{i}] joins two hosts: its delay_us needs a switch")
            delay = str(round(lk.delay_us))
            for ep in switches:
                out.setdefault(ep.node, []).extend(("--port-delay", f"{ep.port}:{delay}"))
                if len(switches) == 1:
                    out[ep.node].extend(("--port-ingress-delay", f"{ep.port}:{delay}"))
        return {name: tuple(args) for name, args in out.items()}

    def start(self) -> EmulatedFabric:
        setLogLevel("warning")
        check_free(self.topo, self.only)
        for name, args in self._link_delays().items():
            self.switch_args_of[name] = (*self.switch_args_of.get(name, ()), *args)
        self._record = NetRecord(f"fabric-{self.topo.name}").__enter__()
        t0 = time.monotonic()
        net = Mininet(controller=None, build=False, autoSetMacs=False, autoStaticArp=False, link=ShapedLink)
        links = LinkBatch()
        self.net = net
        grpc: dict[str, str] = {}
        taken: set[int] = set()
        switches = [sw for sw in self.topo.switches if self._local(sw.name)]
        hosts = [h for h in self.topo.hosts if self._local(h.name)]
        for sw in switches:
            if sw.grpc:
                grpc[sw.name] = sw.grpc
                continue
            port = free_tcp_port(exclude=taken)  # unique: none is bound until the switches start
            taken.add(port)
            grpc[sw.name] = f"{self.grpc_host}:{port}"
        if self.target == "bmv2":
            self.thrift_ports = assign_thrift_ports([s.name for s in switches])
        for h in hosts:
            # Mininet's own commands (pingall, h1 ping h2) address a host by its first NIC
            net.addHost(h.name, ip=h.nics[0].ip if h.nics else None)
        for s in switches:
            net.addSwitch(s.name, cls=P4TargetSwitch, target=self.target, device_id=s.device_id,
                          grpc_address=grpc[s.name], record=self._record, log_dir=self.log_dir,
                          log_level=self.log_level, pcap_dir=self.pcap_dir,
                          thrift_port=self.thrift_ports.get(s.name), defer_ready=True, extra_args=(*self.switch_args, *self.switch_args_of.get(s.name, ())),
                          engine=self.engine)
        for lk in self.topo.links:
            if not (self._local(lk.a.node) and self._local(lk.b.node)):
                continue  # another machine's, or a tunnel's (below)
            kwargs: dict[str, object] = {}
            ends = []
            for ep in (lk.a, lk.b):
                if self.topo.is_switch(ep.node):
                    ends.append((ep.node, {"port": int(ep.port), "intfName": switch_intf_name(ep.node, ep.port)}))
                else:
                    ends.append((ep.node, {"intfName": _intf_name(ep.node, str(ep.port))}))
            (n1, o1), (n2, o2) = ends
            kwargs["intfName1"], kwargs["intfName2"] = o1["intfName"], o2["intfName"]
            if "port" in o1:
                kwargs["port1"] = o1["port"]
            if "port" in o2:
                kwargs["port2"] = o2["port"]
            if self.shape and lk.rate_mbps:
                kwargs["bw"] = lk.rate_mbps
            mtu = self.topo.link_mtu(lk)
            if mtu != ETHERNET_MTU:  # both ends (ShapedIntf.config)
                kwargs["mtu"] = mtu
            net.addLink(n1, n2, cls=BatchedLink, batch=links, **kwargs)
        # recorded before they exist: a fabric killed half-way leaves none behind
        self._record.add_links([*interface_names(self.topo, self.only),
                                *(t.intf for t in self.tunnels if t.port is not None)])
        links.run()
        self._make_tunnels()
        net.build()
        self.timings.build_s = time.monotonic() - t0

        t0 = time.monotonic()
        for sw in net.switches:
            sw.start([])
        for sw in net.switches:
            sw.wait_ready()
        self.timings.switches_s = time.monotonic() - t0

        t0 = time.monotonic()
        self._configure_hosts()
        self.timings.hosts_s = time.monotonic() - t0

        # the live copy: switches' gRPC addresses, and each host's shell (its network
        # namespace) for `mlfabric host exec`
        host_pids = {h.name: int(net.get(h.name).pid) for h in hosts}
        self.live = dataclasses.replace(
            self.topo, switches=tuple(dataclasses.replace(s, grpc=grpc.get(s.name, s.grpc)) for s in self.topo.switches),
            params={**self.topo.params, "host_pids": host_pids, "owner_pid": os.getpid(),
                    PARAM: self.access().to_params()})
        if self.install:
            t0 = time.monotonic()
            reports = install_fabric(self.live, options=InstallOptions())
            failed = [r for r in reports if r.error]
            if failed:
                raise EmulationError("rule installation failed: " + "; ".join(f"{r.switch}: {r.error}" for r in failed))
            self.timings.rules_s = time.monotonic() - t0
            if self.schedule is not None:
                self.schedule_epoch_us, self.clock_reports = install_schedule(
                    self.live, self.schedule, routing=self.routing, hold=self.calendar_queues,
                    margin_us=self.margin_us)
        if self.publish:  # last: a published fabric is a ready one
            dump_topology(self.live, current_fabric_path())
        if self.record_journal:
            journal.record("fabric-up", topology=topology_to_dict(self.live), switch_pids=self.switch_pids())
        return self

    def _local(self, node: str) -> bool:
        return self.only is None or node in self.only

    def _make_tunnels(self) -> None:
        """This machine's ends of the links to other machines: tunnel interfaces in the root
        namespace, handed to their switch as its port or moved into their host, shaped as
        any link is (:class:`ShapedIntf`)."""
        assert self.net is not None
        checked: set[tuple[str, int]] = set()
        for end in self.tunnels:
            if (end.remote, end.mtu) not in checked:
                checked.add((end.remote, end.mtu))
                dev, mtu = _route_mtu(end.remote)
                check_underlay_mtu(end.local, dev, mtu, end.mtu, end.kind)
            for cmd in tunnel_commands(end):
                out = subprocess.run(["ip", *cmd.split()], capture_output=True, text=True)
                if out.returncode:
                    raise EmulationError(f"cannot make the tunnel {end.intf} to {end.remote}: ip {cmd}: "
                                         f"{out.stderr.strip()}")
            node = self.net.get(end.node)
            intf = ShapedIntf(end.intf, node=node, port=end.port)
            params: dict[str, object] = {"mtu": end.mtu}
            if self.shape and end.rate_mbps:
                params["bw"] = end.rate_mbps
            intf.config(**params)
            intf.params.update(params)  # what the link monitor reads (link_monitor.shaped_ends)
            self.tunnel_intfs.append(intf)

    def switch_pids(self) -> dict[str, int]:
        """The process of each switch that runs now."""
        out = {}
        for s in self.topo.switches:
            if not self._local(s.name):
                continue
            proc = getattr(self.switch_process(s.name), "proc", None) if self.net is not None else None
            if proc is not None and proc.poll() is None:
                out[s.name] = proc.pid
        return out

    def _configure_hosts(self) -> None:
        assert self.net is not None
        topo = self.topo
        by_rail: dict[int | None, list[tuple[str, str, str]]] = {}
        for h in topo.hosts:
            for nic in h.nics:
                by_rail.setdefault(nic.rail, []).append((h.name, nic.address, nic.mac))
        topoopt_host_commands = host_commands(topo) if topo.kind == "topoopt" else {}
        work = []
        folder = Path(tempfile.mkdtemp(prefix="mlfabric-hosts-"))
        for h in topo.hosts:
            if not self._local(h.name):
                continue
            node = self.net.get(h.name)
            cmds = []
            arp = []
            for nic in h.nics:
                intf = _intf_name(h.name, nic.name)
                cmds += [f"ip link set {intf} address {nic.mac}", f"ip addr flush dev {intf}",
                         f"ip addr add {nic.ip} dev {intf}", f"ip link set {intf} up"]
                arp += [(ip, mac, intf) for other, ip, mac in by_rail.get(nic.rail, []) if other != h.name]
            cmds += prepare_commands((_intf_name(h.name, n.name) for n in h.nics), frame_skbs=self.frame_skbs,
                                     super_frames=self.super_frames)
            cmds += static_arp_commands(arp + self._service_neighbours(h))
            if self.source_routing:
                cmds += self._rail_source_routes(h)
            if topo.kind == "topoopt":  # host-based forwarding over the one-way circuits
                cmds += topoopt_host_commands[h.name]
            work.append((node, ip_batched(cmds, folder / h.name)))
        try:
            run_parallel(work)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _service_neighbours(self, host) -> list[tuple[str, str, str]]:
        """Each rail NIC's switch-side address (10.R.255.254, the rail's gateway and its
        in-network aggregation service) at the MAC of the switch port the NIC is cabled to."""
        out: list[tuple[str, str, str]] = []
        if self.topo.kind not in ("rail-only", "rail-fat-tree"):
            return out
        for nic in host.nics:
            if nic.rail is None or nic.rail > 255:
                continue
            ends = [lk for lk in self.topo.links_of(host.name) if str(lk.end(host.name).port) == nic.name]
            if len(ends) != 1 or not self.topo.is_switch(ends[0].other(host.name).node):
                continue
            peer = ends[0].other(host.name)
            out.append((service_address(nic.rail), switch_mac(self.topo.switch(peer.node).device_id, int(peer.port)),
                        _intf_name(host.name, nic.name)))
        return out

    def _rail_source_routes(self, host) -> list[str]:
        """Traffic sourced from NIC r leaves through NIC r, via the switch on its link."""
        topo = self.topo
        cmds = []
        for nic in host.nics:
            if nic.rail is None:
                continue
            intf = _intf_name(host.name, nic.name)
            (link,) = [lk for lk in topo.links_of(host.name) if str(lk.end(host.name).port) == nic.name]
            peer = link.other(host.name)
            gw_mac = switch_mac(topo.switch(peer.node).device_id, int(peer.port))
            table = RAIL_TABLE_BASE + nic.rail
            gw = f"10.{nic.rail}.255.254"
            cmds += [f"ip neigh replace {gw} lladdr {gw_mac} dev {intf} nud permanent",
                     f"ip route replace default via {gw} dev {intf} onlink table {table}",
                     f"ip rule add from {nic.address} table {table} priority {1000 + nic.rail}"]
        return cmds

    def stop(self) -> None:
        """Tear everything down; what Mininet cannot remove (a signal interrupted one of its
        shell commands, so it refuses to send more) the records remove."""
        t0 = time.monotonic()
        try:
            if self.net is not None:
                try:
                    stop_network(self.net)
                finally:
                    self.net = None
        finally:
            if self.publish and self.live is not None:
                current_fabric_path().unlink(missing_ok=True)
            if self.live is not None and self.record_journal:
                journal.record("fabric-down", name=self.live.name)
            if self._record is not None:
                self._record.cleanup()
                self._record = None
            self.timings.teardown_s = time.monotonic() - t0

    # -- access ----------------------------------------------------------------------------

    def access(self) -> FabricAccess:
        """Where the switches' logs and pcaps are, and their Thrift ports (published)."""
        server, reason = thrift_support() if self.target == "bmv2" else (False, "")
        return FabricAccess(target=self.target, run_dir=self.run_dir, log_dir=self.log_dir,
                            log_level=self.log_level, pcap_dir=self.pcap_dir, thrift_ports=dict(self.thrift_ports),
                            thrift_server=server, thrift_reason=reason)

    def host(self, name: str):
        if self.net is None:
            raise EmulationError("the fabric is not running")
        return self.net.get(name)

    def switch_process(self, name: str):
        if self.net is None:
            raise EmulationError("the fabric is not running")
        return self.net.get(name).process
