"""The TopoOpt experiment's bandwidth tax, in bytes: each server's nftables counters of what
it originated and what it forwarded, read before and after an iteration."""

from __future__ import annotations

import json

import pytest

from controller.errors import ConfigError
from controller.experiments.topoopt import relay_bytes, tax
from controller.routing.topoopt_routes import ACCOUNTING_TABLE, accounting_commands, host_commands
from controller.topology import topoopt


def _listing(originated: int, forwarded: int) -> str:
    def rule(chain: str, count: int) -> dict:
        return {"rule": {"family": "ip", "table": ACCOUNTING_TABLE, "chain": chain,
                         "expr": [{"counter": {"packets": 1, "bytes": count}}]}}
    return json.dumps({"nftables": [{"metainfo": {"version": "1.0.6"}}, rule("originated", originated),
                                    rule("forwarded", forwarded)]})


def test_the_tax_is_bytes_carried_over_bytes_originated() -> None:
    before = {"s0": relay_bytes(_listing(1000, 0)), "s1": relay_bytes(_listing(0, 500))}
    after = {"s0": relay_bytes(_listing(3000, 0)), "s1": relay_bytes(_listing(0, 1500))}
    assert tax(before, after) == pytest.approx((2000 + 1000) / 2000)


def test_nothing_originated_is_no_tax_rather_than_a_division_by_zero() -> None:
    same = {"s0": (5, 5)}
    assert tax(same, same) != tax(same, same)  # NaN


@pytest.mark.parametrize("text", ["", "not json", json.dumps({"nftables": [{"metainfo": {}}]})])
def test_a_server_without_its_counters_is_named(text: str) -> None:
    with pytest.raises(ConfigError, match=ACCOUNTING_TABLE):
        relay_bytes(text)


def test_the_counters_are_the_experiments_not_every_topoopt_fabrics() -> None:
    """``fabric up`` of a TopoOpt topology forwards without them; the experiment adds them on
    every fabric it compares (fat-trees included)."""
    assert not any("nft" in c for cmds in host_commands(topoopt(8, 2)).values() for c in cmds)
    cmds = accounting_commands()
    assert any("hook output" in c for c in cmds) and any("hook forward" in c for c in cmds)
    assert any('oifname != "lo"' in c for c in cmds)  # a server talking to itself relays nothing
