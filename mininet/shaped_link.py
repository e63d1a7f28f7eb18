"""Mininet links shaped with htb, with htb's quantum scaled to the link rate.

Mininet's TCIntf creates ``htb default 1`` with the kernel's default r2q of 10, so any
rate above ~16 Mbit/s makes tc warn that the class quantum is too big (and rates below
~1 Mbit/s that it is too small). Here r2q is chosen so that the quantum is about 10 kB. Mininet also refuses (and leaves
unshaped, with a warning) any rate above 1 Gbit/s, which a fabric of 100 Mbit/s NICs reaches
on its uplinks; htb shapes far beyond that, so the cap is raised to 100 Gbit/s.
"""

from __future__ import annotations

from mininet.link import Link, TCIntf

__all__ = ["ShapedIntf", "ShapedLink", "htb_r2q"]

TARGET_QUANTUM_BYTES = 10_000


def htb_r2q(rate_mbps: float) -> int:
    """r2q giving a quantum of about 10 kB (always >= 1500 bytes, one MTU).

    >>> htb_r2q(20), htb_r2q(0.5)
    (250, 6)
    """
    rate_bytes = rate_mbps * 1e6 / 8
    return max(1, min(int(rate_bytes / TARGET_QUANTUM_BYTES), int(rate_bytes / 1500) or 1))


class ShapedIntf(TCIntf):
    #: Mbit/s; Mininet's TCIntf stops at 1000
    bwParamMax = 100_000

    def bwCmds(self, bw=None, **kwargs):
        cmds, parent = super().bwCmds(bw=bw, **kwargs)
        if bw:
            r2q = htb_r2q(float(bw))
            cmds = [c.replace("htb default 1", f"htb default 1 r2q {r2q}") for c in cmds]
        return cmds, parent


class ShapedLink(Link):
    """TCLink with :class:`ShapedIntf` on both ends."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("cls1", ShapedIntf)
        kwargs.setdefault("cls2", ShapedIntf)
        super().__init__(*args, **kwargs)
