"""TopoOpt's job iterations (``job_step``) on loopback meshes, one thread per rank: the
model-parallel transfers and the all-reduce split over several rings arrive exactly."""

from __future__ import annotations

import pytest
from test_workloads_collectives import meshes, on_all

from workloads.errors import CommandError
from workloads.job_step import parse_step
from workloads.loopback import loopback_config
from workloads.ops import Executor
from workloads.protocol import parse_command


def _run(world: int, step: dict) -> list[dict]:
    config = loopback_config(world, 1, mesh="full", timeout_s=20.0)
    with meshes(config) as ms:
        return on_all(world, lambda k: Executor(ms[k]).execute(parse_command({"op": "job_step", "step": step})))


def test_a_mixed_iteration_splits_each_groups_all_reduce_over_its_rings_and_delivers_every_transfer() -> None:
    step = {"compute_s": 0.01,
            "mp": [[0, 1, 4000], [1, 0, 4000], [2, 5, 1204], [5, 2, 8]],
            "groups": [{"bytes": 40_004, "rings": [[0, 2, 4], [0, 4, 2]], "shares": [0.7, 0.3]},
                       {"bytes": 40_004, "rings": [[1, 3, 5], [3, 1, 5], [5, 1, 3]], "shares": [1, 1, 2]}]}
    results = _run(6, step)
    assert all(r["ok"] for r in results), [r["error"] for r in results if not r["ok"]]
    assert {"compute", "mp", "allreduce"} <= set(results[0]["phases"])
    assert results[0]["bytes"] == 4000 and results[5]["bytes"] == 8


def test_rings_that_share_a_neighbour_take_turns_on_its_connection() -> None:
    # both rings send 0 -> 1 -> 2 -> 0: one connection carries one frame at a time
    step = {"groups": [{"bytes": 30_000, "rings": [[0, 1, 2], [0, 1, 2]], "shares": [1, 1]}]}
    results = _run(3, step)
    assert all(r["ok"] for r in results), [r["error"] for r in results if not r["ok"]]


@pytest.mark.parametrize(("step", "message"), [
    ({"mp": [[0, 3, 8]]}, r"step.mp\[0\]"),
    ({"groups": [{"bytes": 8, "rings": [[0, 1], [0, 2]], "shares": [1, 1]}]}, "same members"),
    ({"groups": [{"bytes": 8, "rings": [[0, 1]], "shares": [0]}]}, "not all 0"),
    ({"groups": [{"bytes": 8, "rings": [[0, 1]], "shares": [1]}, {"bytes": 8, "rings": [[1, 2]], "shares": [1]}]},
     "rank 1 is in two groups"),
    ({"colour": 1}, "unknown key 'colour'"),
])
def test_a_bad_step_is_refused_by_name(step: dict, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        parse_step(step, 3)
