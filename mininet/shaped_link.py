"""Mininet links shaped with htb, with htb's quantum scaled to the link rate.

Mininet's TCIntf creates ``htb default 1`` with the kernel's default r2q of 10, so any
rate above ~16 Mbit/s makes tc warn that the class quantum is too big (and rates below
~1 Mbit/s that it is too small). Here r2q is chosen so that the quantum is about 10 kB.
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
