"""``mlfabric rules``: options anywhere on the line, and topology files without addresses
(no switch needed: parsing and the pure helpers)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from controller.cli import main
from controller.cli.main import build_parser
from controller.cli.running_fabric import with_fabric_addresses
from controller.errors import MlfabricError
from controller.topology import load_topology, rail_only

REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "topologies" / "rail-only-4x4.yaml"


@pytest.mark.parametrize("command", ["add", "modify", "delete"])
@pytest.mark.parametrize("tail", [
    ["ipv4_lpm", "--default", "drop"],
    ["ipv4_lpm", "drop", "--default"],
    ["--default", "ipv4_lpm", "drop"],
])
def test_options_go_anywhere_among_the_tokens(command: str, tail: list[str]) -> None:
    args = build_parser().parse_args(["rules", command, "rail0", *tail])
    assert (args.switch, args.table, args.tokens, args.default) == ("rail0", "ipv4_lpm", ["drop"], True)


def test_priority_between_match_and_action_keeps_the_tokens_in_order() -> None:
    args = build_parser().parse_args(["rules", "add", "rail0", "t", "a=1", "--priority", "7", "fwd", "port=2", "--json"])
    assert (args.tokens, args.priority, args.json) == (["a=1", "fwd", "port=2"], 7, True)


def test_a_file_without_addresses_takes_the_running_fabrics() -> None:
    topo = rail_only(2, 2)
    live = dataclasses.replace(topo, switches=tuple(
        dataclasses.replace(s, grpc=f"127.0.0.1:{50000 + i}") for i, s in enumerate(topo.switches)))
    got = with_fabric_addresses(topo, "t.yaml", live)
    assert [s.grpc for s in got.switches] == [s.grpc for s in live.switches]
    assert with_fabric_addresses(live, "t.yaml", None) is live  # its own addresses: nothing borrowed


def test_a_file_without_addresses_and_no_matching_fabric_is_one_error() -> None:
    topo = rail_only(2, 2)
    with pytest.raises(MlfabricError, match=r"no fabric is running: run `mlfabric fabric up t.yaml` first"):
        with_fabric_addresses(topo, "t.yaml", None)
    other = rail_only(4, 4)
    with pytest.raises(MlfabricError, match=r"the running fabric \(.*\) has other switches"):
        with_fabric_addresses(topo, "t.yaml", other)


def test_diff_of_a_file_without_addresses_and_no_fabric_says_how_to_fix_it(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("MLFABRIC_STATE_DIR", str(tmp_path))
    assert not any(s.grpc for s in load_topology(TOPO).switches)
    for command in ("diff", "sync", "install"):
        assert main(["rules", command, str(TOPO)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert f"gives no gRPC address for rail0 and 3 more switches and no fabric is running: " \
               f"run `mlfabric fabric up {TOPO}` first" in err
