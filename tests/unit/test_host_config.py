"""Host shell batches stay under a terminal's line limit (a longer line is cut by the tty, and
the commands after the cut are lost without an error)."""

from __future__ import annotations

from controller.emulation import load_emulation_module

host_config = load_emulation_module("host_config")


def test_long_batches_are_split_into_lines_a_terminal_takes_whole() -> None:
    cmds = [f"ip route replace 10.100.0.{k}/32 via 10.100.0.2 dev s0-eth0 onlink" for k in range(200)]
    lines = host_config.chunks(cmds)
    assert len(lines) > 1 and all(len(line) <= host_config.MAX_LINE for line in lines)
    assert "; ".join(lines).split("; ") == cmds  # nothing lost, nothing reordered
    assert host_config.chunks([]) == []
    assert host_config.chunks(["x" * 5000]) == ["x" * 5000]  # a command longer than a line goes alone


def test_every_route_gets_the_minimum_retransmission_timeout_with_its_own_attributes() -> None:
    routes = [{"dst": "10.0.0.0/16", "dev": "s0-eth0", "protocol": "kernel", "scope": "link",
               "prefsrc": "10.0.1.0", "flags": ["linkdown"]},
              {"dst": "10.1.0.0/16", "gateway": "10.0.0.254", "dev": "s0-eth0"}]
    assert host_config.rto_min_commands(routes, 1000) == [
        "ip route change 10.0.0.0/16 dev s0-eth0 proto kernel scope link src 10.0.1.0 rto_min 1000ms",
        "ip route change 10.1.0.0/16 via 10.0.0.254 dev s0-eth0 rto_min 1000ms"]
    assert host_config.rto_min_commands([], 1000) == []
