"""Stopping a Mininet network that a signal may have interrupted mid-command."""

from __future__ import annotations

import logging

__all__ = ["stop_network"]

log = logging.getLogger("mlfabric.emulation")


def stop_network(net) -> None:  # net: mininet.net.Mininet
    """``net.stop()``, also after a signal interrupted one of Mininet's shell commands (the
    node then refuses to send more: ``assert not self.waiting``). A failure is logged, not
    raised: the caller's NetRecord removes what Mininet could not."""
    try:
        for node in (*net.hosts, *net.switches):
            if getattr(node, "waiting", False):  # interrupted mid-command
                node.waiting = False
        net.stop()
    except Exception as exc:
        log.warning("Mininet teardown failed (%s): removing what the records name", exc)
