"""Stopping a Mininet network that a signal may have interrupted mid-command."""

from __future__ import annotations

import logging

from mlfabric_emulation.batched_links import delete_links

__all__ = ["stop_network"]

log = logging.getLogger("mlfabric.emulation")


def stop_network(net) -> None:  # net: mininet.net.Mininet
    """``net.stop()``, also after a signal interrupted one of Mininet's shell commands (the
    node then refuses to send more: ``assert not self.waiting``). A failure is logged, not
    raised: the caller's NetRecord removes what Mininet could not.

    Faster than Mininet alone: every switch process is told to stop at once, and the links
    go in one batch (:func:`delete_links`) instead of two shell commands each."""
    try:
        for node in (*net.hosts, *net.switches):
            if getattr(node, "waiting", False):  # interrupted mid-command
                node.waiting = False
        for sw in net.switches:
            process = getattr(sw, "process", None)
            if process is not None:
                process.terminate()
        for sw in net.switches:
            sw.stop(deleteIntfs=False)
        delete_links(net.links)
        net.links[:] = [link for link in net.links if link.intf1 is not None]
        net.stop()
    except Exception as exc:
        log.warning("Mininet teardown failed (%s): removing what the records name", exc)
