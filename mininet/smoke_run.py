"""The smoke run: two Mininet hosts, one P4 switch, real P4Runtime, a real ping.

It loads the compiled rail_switch pipeline into the switch over P4Runtime, installs one
route per host, pings across the switch and reads the per-port counters back. Exit status
0 means the whole path works: compiled pipeline -> switch -> controller -> hosts.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time

from mininet.log import setLogLevel
from mininet.net import Mininet
from mlfabric_emulation.host_config import prepare_host, set_static_arp
from mlfabric_emulation.p4_switch_nodes import P4TargetSwitch
from mlfabric_emulation.teardown import stop_network

from controller.experiments.results import interrupt_on_signals
from controller.netstate import NetRecord
from controller.p4build import pipeline_files
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.entities import TableRule, encode_rule, parse_match, update
from controller.p4runtime.schema import P4Schema, load_p4info
from controller.p4runtime.values import parse_int
from controller.readiness import free_tcp_port

log = logging.getLogger("mlfabric.smoke")

HOSTS = (("h1", "10.0.0.1", "00:00:00:00:00:01", 1), ("h2", "10.0.0.2", "00:00:00:00:00:02", 2))
SWITCH_MAC = "00:00:00:00:0a:{:02x}"


def _routes(schema: P4Schema) -> list[TableRule]:
    """One /32 route per host: out of the host's port, MACs rewritten."""
    table = schema.table("ipv4_lpm")
    rules = []
    for _, ip, mac, port in HOSTS:
        name, match = parse_match(table, "hdr.ipv4.dst_addr", f"{ip}/32")
        params = {"port": port, "dmac": parse_int(mac, 48), "smac": parse_int(SWITCH_MAC.format(port), 48)}
        rules.append(TableRule(table.name, {name: match}, "set_nexthop", params))
    return rules


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="mlfabric smoke")
    parser.add_argument("--target", choices=("python", "bmv2"), default="python", help="switch target")
    args = parser.parse_args(argv)
    setLogLevel("warning")
    art = pipeline_files("rail_switch")
    p4info = load_p4info(art.p4info)
    schema = P4Schema(p4info)
    t0 = time.monotonic()
    received, out = 0, ""
    with interrupt_on_signals(), NetRecord("smoke") as record:  # SIGTERM/SIGHUP tear down as Ctrl-C does
        net = Mininet(controller=None, build=False, autoSetMacs=False, autoStaticArp=False)
        hosts = {name: net.addHost(name, ip=f"{ip}/24", mac=mac) for name, ip, mac, _ in HOSTS}
        grpc = f"127.0.0.1:{free_tcp_port()}"
        s1 = net.addSwitch("s1", cls=P4TargetSwitch, target=args.target, device_id=1,
                           grpc_address=grpc, record=record)
        for name, _, _, port in HOSTS:
            net.addLink(hosts[name], s1, port2=port)
        try:
            net.build()
            net.start()
            print(f"[smoke] {args.target} switch s1 up at {grpc} ({s1.process.startup_seconds:.2f} s)")
            for name, _ip, _mac, _ in HOSTS:
                prepare_host(hosts[name])
            for name, _, _, _ in HOSTS:
                others = [(ip, mac, f"{name}-eth0") for n, ip, mac, _ in HOSTS if n != name]
                set_static_arp(hosts[name], others)
            with P4RuntimeClient(grpc, device_id=1) as client:
                client.set_pipeline(p4info, art.json.read_bytes())
                rules = _routes(schema)
                client.write([update("insert", encode_rule(schema, r)) for r in rules])
                print(f"[smoke] pipeline rail_switch loaded, {len(rules)} routes installed")
                out = hosts["h1"].cmd("ping -c 3 -i 0.2 -W 2 10.0.0.2")
                match = re.search(r"(\d+) received", out)
                received = int(match.group(1)) if match else 0
                rtt = re.search(r"= [\d.]+/([\d.]+)/", out)
                counter = schema.counter("port_rx")
                rx = {c.index.index: c.data.packet_count for c in client.read_counter(counter.id)
                      if c.data.packet_count}
                print(f"[smoke] h1 -> h2 ping: {received}/3 replies"
                      + (f", avg rtt {rtt.group(1)} ms" if rtt else ""))
                print(f"[smoke] port_rx packet counters: {rx}")
        finally:
            stop_network(net)
    ok = received == 3
    if not ok:
        print("[smoke] ping output:\n" + out.strip())
    print(f"[smoke] {'PASS' if ok else 'FAIL'} in {time.monotonic() - t0:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
