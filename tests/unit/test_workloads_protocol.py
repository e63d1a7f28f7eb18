"""Worker configuration, command protocol, deterministic inputs and their checks."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from controller.errors import ConfigError
from workloads.collectives import chunk_bounds
from workloads.config import WorkloadConfig
from workloads.driver import worker_argv
from workloads.errors import CommandError, VerificationError
from workloads.ops import allreduce_input, alltoall_input, check_allreduce, check_alltoall
from workloads.plan import Layout
from workloads.protocol import Parallelism, error_result, parse_command, parse_ready


def config_dict(**changes: Any) -> dict[str, Any]:
    ranks = [{"rank": d * 2 + r, "server": d, "rail": r, "ip": f"10.0.{r}.{d + 1}"}
             for d in range(2) for r in range(2)]
    return {"ranks": ranks, "servers": 2, "rails": 2, "port": 7000, "timeout_s": 30, **changes}


def test_config_round_trip(tmp_path: Path) -> None:
    cfg = WorkloadConfig.from_dict(config_dict(mesh="full", sock_buf_bytes=1 << 20))
    assert cfg.layout.at(1, 1).ip == "10.0.1.2"
    assert cfg.listen_port(3) == 7003 and cfg.start_timeout_s == 30.0
    again = WorkloadConfig.load(cfg.dump(tmp_path / "job.json"))
    assert again == cfg


def test_config_ranks_may_come_in_any_order() -> None:
    data = config_dict()
    data["ranks"].reverse()
    assert [r.rank for r in WorkloadConfig.from_dict(data).layout.ranks] == [0, 1, 2, 3]


@pytest.mark.parametrize(("changes", "key", "problem"), [
    ({"colour": "red"}, "colour", "unknown key"),
    ({"servers": "2"}, "servers", "must be an integer"),
    ({"timeout_s": 0}, "timeout_s", "seconds > 0"),
    ({"timeout_s": True}, "timeout_s", "seconds > 0"),
    ({"mesh": "star"}, "mesh", "must be one of rail, full"),
    ({"port": 65534}, "port", "exceeds 65535"),
    ({"rails": 3}, "ranks", "need 6 ranks"),
    ({"ranks": "all"}, "ranks", "must be a list"),
])
def test_config_is_strict(changes: dict[str, Any], key: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as err:
        WorkloadConfig.from_dict(config_dict(**changes), "job.json")
    assert err.value.file == "job.json" and err.value.key == key


def test_config_rank_entries_are_strict() -> None:
    data = config_dict()
    data["ranks"][2] = {**data["ranks"][2], "gpu": 1}
    with pytest.raises(ConfigError, match=r"ranks\[2\]"):
        WorkloadConfig.from_dict(data)
    data = config_dict()
    data["ranks"][1]["ip"] = 17
    with pytest.raises(ConfigError, match=r"ranks\[1\]\.ip"):
        WorkloadConfig.from_dict(data)


def test_config_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        WorkloadConfig.load(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(ConfigError, match="not JSON") as err:
        WorkloadConfig.load(bad)
    assert err.value.file == str(bad)


def test_command_defaults_and_round_trip() -> None:
    cmd = parse_command({"op": "train_step", "bytes": 4096, "iter": 7, "compute_s": 0.5,
                         "parallelism": {"moe_bytes": 1024, "dp_allreduce": "rail_allreduce"}})
    assert cmd.parallelism == Parallelism(dp_allreduce="rail_allreduce", moe_bytes=1024)
    assert parse_command(json.dumps(cmd.to_dict())) == cmd
    assert parse_command('{"op": "quit"}').op == "quit"
    assert parse_command({"op": "allreduce", "seq": 4}).seq == 4
    concurrent = parse_command({"op": "alltoall", "schedule": "concurrent"})
    assert concurrent.schedule == "concurrent" and parse_command(concurrent.to_dict()) == concurrent


@pytest.mark.parametrize(("command", "match"), [
    ("{not json", "not JSON"),
    ("[1, 2]", "JSON object"),
    ({"bytes": 4}, "op: must be one of"),
    ({"op": "broadcast"}, "op: must be one of"),
    ({"op": "allreduce", "bytes": -1}, "bytes: must be >= 0"),
    ({"op": "allreduce", "bytes": 1.5}, "bytes: must be an integer"),
    ({"op": "allreduce", "ring": "star"}, "ring: must be one of"),
    ({"op": "alltoall", "schedule": "ring"}, "schedule: must be one of"),
    ({"op": "train_step", "compute_s": -1}, "compute_s"),
    ({"op": "train_step", "parallelism": {"pp": 2}}, "parallelism: unknown key 'pp'"),
    ({"op": "train_step", "parallelism": {"moe_alltoall": "ring"}}, "moe_alltoall: must be one of"),
    ({"op": "train_step", "parallelism": {"dp_allreduce": "alltoall"}}, "dp_allreduce: must be one of"),
    ({"op": "allreduce", "verify": "yes"}, "verify"),
])
def test_bad_commands_are_rejected(command: Any, match: str) -> None:
    with pytest.raises(CommandError, match=match):
        parse_command(command)


def test_error_result_echoes_what_it_can() -> None:
    out = error_result(2, {"op": "alltoall", "iter": 3, "seq": 9}, "bad")
    assert out == {"rank": 2, "op": "alltoall", "iter": 3, "ok": False, "error": "bad",
                   "seconds": 0.0, "phases": {}, "bytes": None, "seq": 9}
    assert error_result(1, None, "x")["op"] is None


def test_ready_lines() -> None:
    assert parse_ready("READY 12") == 12
    assert parse_ready("READY") is None and parse_ready("READY x") is None


@pytest.mark.parametrize(("n", "parts"), [(0, 3), (1, 4), (10, 3), (1000003, 7), (8, 8)])
def test_chunk_bounds_cover_the_buffer(n: int, parts: int) -> None:
    bounds = chunk_bounds(n, parts)
    assert len(bounds) == parts and bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    sizes = [b - a for a, b in bounds]
    assert max(sizes) - min(sizes) <= 1


def test_allreduce_inputs_sum_exactly() -> None:
    world = 365  # the largest world whose sums stay exact in float32
    total = np.zeros(1000, dtype=np.float32)
    for k in range(world):
        total += allreduce_input(k, 1000)
    check_allreduce(total, tuple(range(world)), "sum")
    total[999] += 1
    with pytest.raises(VerificationError, match="element 999 of 1000"):
        check_allreduce(total, tuple(range(world)), "sum")


def test_alltoall_inputs_and_check() -> None:
    world = 4
    sends = [alltoall_input(i, world, 3) for i in range(world)]
    received = np.stack([sends[i][2] for i in range(world)])
    check_alltoall(received, 2, "a2a")
    received[1, 2] = 0
    with pytest.raises(VerificationError, match="chunk from rank 1"):
        check_alltoall(received, 2, "a2a")


def test_worker_argv() -> None:
    argv = worker_argv("/tmp/x.json", 5, python="py")
    assert argv[:3] == ["py", "-m", "workloads.worker"] and argv[argv.index("--rank") + 1] == "5"


def test_layout_grid_numbering() -> None:
    lay = Layout.grid(3, 4, lambda d, r: f"10.0.{r}.{d + 1}")
    assert [lay[k].server * 4 + lay[k].rail for k in range(12)] == list(range(12))
