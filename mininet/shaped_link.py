"""Mininet links shaped with htb, with htb's quantum scaled to the link rate.

Mininet's TCIntf creates ``htb default 1`` with the kernel's default r2q of 10, so any
rate above ~16 Mbit/s makes tc warn that the class quantum is too big (and rates below
~1 Mbit/s that it is too small). Here r2q is chosen so that the quantum is about 10 kB. Mininet also refuses (and leaves
unshaped, with a warning) any rate above 1 Gbit/s, which a fabric of 100 Mbit/s NICs reaches
on its uplinks; htb shapes far beyond that, so the cap is raised to 100 Gbit/s.

A link's ``mtu`` (the topology's, :meth:`~controller.topology.model.Topology.link_mtu`) is
set on both of its interfaces before they are shaped, and htb's quantum is never below one
frame of that MTU.
"""

from __future__ import annotations

from mininet.link import Link, TCIntf

__all__ = ["ShapedIntf", "ShapedLink", "htb_burst", "htb_r2q"]

TARGET_QUANTUM_BYTES = 10_000


def htb_r2q(rate_mbps: float, mtu: int = 1500) -> int:
    """r2q giving a quantum of about 10 kB, and never below one frame of ``mtu``.

    >>> htb_r2q(20), htb_r2q(0.5), htb_r2q(20, mtu=9000), htb_r2q(400, mtu=9000)
    (250, 6, 250, 5000)
    """
    rate_bytes = rate_mbps * 1e6 / 8
    frame = mtu + 18  # Ethernet header and FCS
    return max(1, min(int(rate_bytes / max(TARGET_QUANTUM_BYTES, frame)), int(rate_bytes / frame) or 1))


def htb_burst(mtu: int = 1500) -> int:
    """The bytes htb may send at once on a link of ``mtu``: Mininet's 15 kB, or two frames.

    >>> htb_burst(), htb_burst(9000)
    (15000, 18036)
    """
    return max(15_000, 2 * (mtu + 18)) if mtu > 1500 else 15_000


class ShapedIntf(TCIntf):
    #: Mbit/s; Mininet's TCIntf stops at 1000
    bwParamMax = 100_000

    mtu = 1500

    def config(self, mtu=None, **params):
        """Mininet's TCIntf configuration, after this interface's MTU is set."""
        if mtu is not None:
            self.mtu = int(mtu)
            out = self.cmd(f"ip link set dev {self.name} mtu {self.mtu} && echo mtu-ok")
            if "mtu-ok" not in out:
                raise RuntimeError(f"cannot set MTU {self.mtu} on {self.name}: {out.strip()}")
        return super().config(**params)

    def bwCmds(self, bw=None, **kwargs):
        cmds, parent = super().bwCmds(bw=bw, **kwargs)
        if bw:
            r2q = htb_r2q(float(bw), self.mtu)
            cmds = [c.replace("htb default 1", f"htb default 1 r2q {r2q}") for c in cmds]
            if self.mtu > 1500:  # burst and cburst of at least one frame (htb's cburst default is 1,600 B)
                frame = self.mtu + 18
                cmds = [c.replace("burst 15k", f"burst {htb_burst(self.mtu)} cburst {frame}") for c in cmds]
        return cmds, parent


class ShapedLink(Link):
    """TCLink with :class:`ShapedIntf` on both ends."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("cls1", ShapedIntf)
        kwargs.setdefault("cls2", ShapedIntf)
        super().__init__(*args, **kwargs)
