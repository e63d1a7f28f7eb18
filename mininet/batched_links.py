"""Mininet links made and configured in batches, not one shell command at a time.

Mininet makes each veth pair with one ``ip link add`` in its first node's shell, and then
configures each end with four to six more round trips (MAC, ``ifconfig up``, ``ethtool``,
``tc qdisc show``, the htb qdisc and class): about 30 ms a link, 30 s for the 1,024 links
of a 1,024-GPU rail-only fabric, and as many again to delete them one by one at teardown.

:class:`BatchedLink` keeps Mininet's objects (nodes hold their :class:`ShapedIntf`, ports and
names as usual) but only *records* what each link needs; :meth:`LinkBatch.run` then makes
every pair with one ``ip -batch`` in the root namespace (each end placed in its node's
namespace), and configures each namespace's ends with one ``ip -batch`` and one
``tc -batch``, the namespaces in parallel. The ends in the root namespace join an interface
group of the batch's own, and :func:`delete_links` removes them all with one ``ip link del
group``: the kernel unregisters them together (deleting a veth's end deletes its peer), where
one deletion at a time waits for its own RCU grace period (256 veths: 5.6 s one by one, under
0.1 s as a group).

Only what a fabric's links use is deferred: a rate (htb, as :class:`ShapedIntf` shapes it)
and an MTU. A link asking for delay, loss, a queue limit or other offloads is configured by
Mininet itself, at once.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from mininet.link import Link
from mlfabric_emulation.host_config import run_parallel
from mlfabric_emulation.shaped_link import ShapedIntf

__all__ = ["BatchedLink", "LinkBatch", "delete_links", "link_group", "veth_add_line"]

_serial = itertools.count(1)


def link_group(pid: int, serial: int) -> int:
    """The interface group of a process's ``serial``-th batch: no two live processes share
    one, and a process's batches differ (modulo 256).

    >>> link_group(4_194_304, 1), link_group(7, 256) == link_group(7, 0)
    (1073741825, True)
    """
    return (pid << 8) | (serial & 0xFF)


#: what a fresh veth already has: Mininet's ``ethtool -K IF gro off tx on rx on`` changes nothing
_VETH_OFFLOADS = {"gro": False, "txo": True, "rxo": True}
#: configuration this module applies in a batch; any other parameter is left to Mininet
_BATCHED = {"bw", "mtu", "up", "mac", "ip", "port", "moveIntfFn", *_VETH_OFFLOADS}


def veth_add_line(name1: str, name2: str, mac1: str | None, mac2: str | None,
                  ns1: int | None, ns2: int | None, group: int) -> str:
    """The ``ip -batch`` line making a veth pair, each end in the namespace of a process
    (None: the root namespace, where it joins interface ``group``).

    >>> veth_add_line("h0-eth0", "s0-eth1", "00:00:00:00:00:01", None, 42, None, 7)
    'link add name h0-eth0 address 00:00:00:00:00:01 netns 42 type veth peer name s0-eth1 group 7'
    """
    def end(name: str, mac: str | None, ns: int | None) -> str:
        return (f"name {name}" + (f" address {mac}" if mac else "")
                + (f" netns {ns}" if ns is not None else f" group {group}"))

    return f"link add {end(name1, mac1, ns1)} type veth peer {end(name2, mac2, ns2)}"


class LinkBatch:
    """The links recorded since the last :meth:`run`, and what each end's namespace must do."""

    def __init__(self) -> None:
        #: the interface group of this batch's ends in the root namespace
        self.group = link_group(os.getpid(), next(_serial))
        self.pairs: list[str] = []
        #: per node (keyed by its name): its ``ip -batch`` and ``tc -batch`` lines, in order
        self.ip_lines: dict[str, list[str]] = {}
        self.tc_lines: dict[str, list[str]] = {}
        self.nodes: dict[str, object] = {}

    def add_pair(self, line: str) -> None:
        self.pairs.append(line)

    def configure(self, node, ip: Sequence[str], tc: Sequence[str]) -> None:
        self.nodes[node.name] = node
        self.ip_lines.setdefault(node.name, []).extend(ip)
        self.tc_lines.setdefault(node.name, []).extend(tc)

    def run(self) -> None:
        """Make every recorded pair (from this process, in the root namespace), then
        configure every end, the nodes' shells in parallel."""
        if not self.pairs and not self.nodes:
            return
        with tempfile.TemporaryDirectory(prefix="mlfabric-links-") as tmp:
            folder = Path(tmp)
            if self.pairs:
                _ip_batch(self.pairs, folder / "pairs")
            work = []
            for i, (name, node) in enumerate(self.nodes.items()):
                cmds = []
                for tool, lines in (("ip", self.ip_lines[name]), ("tc", self.tc_lines[name])):
                    if lines:
                        path = folder / f"{i}.{tool}"
                        path.write_text("\n".join(lines) + "\n")
                        cmds.append(f"{tool} -force -batch {path} 2>&1")
                if cmds:
                    work.append((node, cmds))
            outputs = run_parallel(work)
        errors = [f"{node.name}: {out.strip()}" for (node, _), out in zip(work, outputs, strict=True) if out.strip()]
        self.pairs.clear()
        self.ip_lines.clear()
        self.tc_lines.clear()
        self.nodes.clear()
        if errors:
            raise RuntimeError("configuring the links failed: " + "; ".join(errors)[:2000])


def _ip_batch(lines: Sequence[str], path: Path) -> None:
    path.write_text("\n".join(lines) + "\n")
    done = subprocess.run(["ip", "-batch", str(path)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"making the links failed: {(done.stderr or done.stdout).strip()[:2000]}")


class _DeferredIntf(ShapedIntf):
    """A :class:`ShapedIntf` whose configuration is recorded in its link's batch."""

    def config(self, mtu=None, **params):
        batch: LinkBatch | None = getattr(self.link, "batch", None)
        if batch is None or not set(params) <= _BATCHED or any(
                params.get(k, v) != v for k, v in _VETH_OFFLOADS.items()):
            return super().config(mtu=mtu, **params)
        ip: list[str] = []
        if mtu is not None:
            self.mtu = int(mtu)
            ip.append(f"link set dev {self.name} mtu {self.mtu}")
        if params.get("ip"):
            ip.append(f"addr add {params['ip']} dev {self.name}")
            self.ip, _, prefix = str(params["ip"]).partition("/")
            self.prefixLen = int(prefix) if prefix else None
        if params.get("up", True):
            ip.append(f"link set dev {self.name} up")
        tc: list[str] = []
        bw = params.get("bw")
        if bw is not None:
            cmds, _ = self.bwCmds(bw=bw)
            tc = [(c % ("tc", self.name)).removeprefix("tc ") for c in cmds]
        batch.configure(self.node, ip, tc)
        return None


class BatchedLink(Link):
    """A veth link recorded in ``batch`` (made by :meth:`LinkBatch.run`), with
    :class:`ShapedIntf` ends (a ``bw`` is shaped with htb, as :class:`ShapedLink` does)."""

    def __init__(self, node1, node2, *, batch: LinkBatch, **kwargs) -> None:
        self.batch = batch
        kwargs.setdefault("cls1", _DeferredIntf)
        kwargs.setdefault("cls2", _DeferredIntf)
        super().__init__(node1, node2, **kwargs)

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None,
                     node1=None, node2=None, deleteIntfs=True):
        def ns(node) -> int | None:
            return node.pid if node is not None and node.inNamespace else None

        self.batch.add_pair(veth_add_line(intfname1, intfname2, addr1, addr2, ns(node1), ns(node2),
                                          self.batch.group))


def delete_links(links: Iterable[Link]) -> None:
    """Delete every batched link's veth pair at once (``ip link del group``, one group per
    batch) and forget the links in their nodes, so that Mininet's own teardown does not
    delete them again one by one. Other links are left to Mininet."""
    groups: set[int] = set()
    for link in links:
        batch = getattr(link, "batch", None)
        if batch is None or link.intf1 is None:
            continue
        groups.add(batch.group)
        for intf in (link.intf1, link.intf2):
            intf.node.delIntf(intf)
            intf.link = None
        link.intf1 = link.intf2 = None
    for group in sorted(groups):
        subprocess.run(["ip", "link", "del", "group", str(group)], capture_output=True, check=False)
