"""TopoOpt's co-optimization, pure: job files, demand extraction, TopologyFinder, the
iteration-time model and the strategy search it alternates with."""

from __future__ import annotations

import itertools
import random

import pytest

from controller.errors import ConfigError
from controller.topoopt.demand import AllReduceGroup, Demand, demand
from controller.topoopt.finder import find_wiring, matchings, rings_over_groups, totient_wiring
from controller.topoopt.job import Strategy, job_to_dict, load_job, parse_job
from controller.topoopt.search import best_round, co_optimize, moves, search_strategy
from controller.topoopt.timing import all_group_rings, fat_tree_time, wiring_time
from controller.topoopt.wiring import Wiring, stride_perm

DLRM = {"name": "d", "model": "dlrm", "servers": 8, "compute_ms": 10, "dense_mb": 1.0, "tables": 4, "lookup_mb": 0.1}
TRANSFORMER = {"name": "t", "model": "transformer", "servers": 8, "compute_ms": 10, "params_mb": 2.0,
               "activation_mb": 0.1, "strategy": {"stages": 2}}


def test_the_shipped_jobs_load_and_round_trip() -> None:
    from pathlib import Path

    for path in sorted(Path(__file__).parents[2].joinpath("topologies/jobs").glob("topoopt-*.yaml")):
        job = load_job(path)
        assert parse_job(job_to_dict(job), str(path)) == job


@pytest.mark.parametrize(("change", "message"), [
    ({"model": "cnn"}, "model: one of dlrm, transformer"),
    ({"colour": 1}, "colour: unknown key for a dlrm job"),
    ({"servers": 2}, "servers: must be an integer >= 3"),
    ({"dense_mb": -1}, "dense_mb: must be a finite number >= 0"),
    ({"strategy": {"tables": [0, 9, 1, 2]}}, r"strategy.tables\[1\]: a server index 0..7"),
    ({"strategy": {"tables": [0]}}, r"strategy.tables: one server per table \(4\)"),
    ({"strategy": {"stages": 3}}, "unknown key for a dlrm strategy"),
])
def test_a_bad_dlrm_job_is_refused_in_one_line_naming_the_key(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        parse_job({**DLRM, **change}, "job.yaml")
    assert "\n" not in str(err.value) and str(err.value).startswith("job.yaml: ")


@pytest.mark.parametrize(("strategy", "message"), [
    ({"stages": 3}, "strategy.stages: must divide the 8 servers"),
    ({"stages": 2, "placement": [0, 1, 2, 3, 4, 5, 6, 6]}, "strategy.placement: a permutation"),
    ({"stages": 2, "placement": "0-7"}, "strategy.placement: must be a list"),
])
def test_a_bad_transformer_strategy_is_refused_by_name(strategy: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_job({**TRANSFORMER, "strategy": strategy})


def test_dlrm_demand_is_the_dense_all_reduce_and_every_table_to_every_server_and_back() -> None:
    job = parse_job({**DLRM, "strategy": {"tables": [0, 0, 3, 5]}})
    d = demand(job, job.strategy)
    assert d.groups == (AllReduceGroup(tuple(range(8)), 1.0),)
    assert d.mp[0, 1] == d.mp[1, 0] == pytest.approx(0.2)  # server 0 holds two tables
    assert d.mp[3, 5] == d.mp[5, 3] == pytest.approx(0.2)  # both hold one, each serves the other
    assert d.mp_out(0) == pytest.approx(0.2 * 7 + 0.1 * 2) and (0, 0) not in d.mp  # and gradients to 3 and 5
    assert sum(d.mp.values()) == pytest.approx(4 * 7 * 2 * 0.1)


def test_transformer_demand_is_per_stage_all_reduce_and_activations_between_consecutive_stages() -> None:
    job = parse_job({**TRANSFORMER, "strategy": {"stages": 4, "placement": [7, 6, 5, 4, 3, 2, 1, 0]}})
    d = demand(job, job.strategy)
    assert [g.members for g in d.groups] == [(7, 3), (6, 2), (5, 1), (4, 0)]
    assert all(g.mb == 0.5 for g in d.groups)  # a quarter of the model each
    assert set(d.mp) == {(7, 6), (6, 7), (6, 5), (5, 6), (5, 4), (4, 5), (3, 2), (2, 3), (2, 1), (1, 2), (1, 0), (0, 1)}
    assert d.mp[7, 6] == pytest.approx(0.4)  # a replica of 4 stages carries 4 servers' share of the batch


def test_rings_over_groups_are_distinct_one_way_rings_of_each_group() -> None:
    d = Demand(8, (AllReduceGroup((0, 2, 4, 6), 1.0), AllReduceGroup((1, 3, 5, 7), 1.0)), {})
    circuits = rings_over_groups(d, 3)
    wiring = Wiring(8, tuple(p for p, _ in circuits))
    rings = all_group_rings(wiring, d.groups)
    # strides 1 and 3 of each group; the ring over all visits each group as its stride-1 ring does
    assert [len(r) for r in rings] == [2, 2] and circuits[2][1] == "ring 1"
    assert [r.order for r in rings[0]] == [(0, 2, 4, 6), (0, 6, 4, 2)] and all(r.direct for r in rings[0])
    assert sum(r.share for r in rings[0]) == pytest.approx(1.0)


def test_matchings_wire_the_heaviest_pairs_both_ways_and_never_twice() -> None:
    d = Demand(6, (), {(0, 1): 9.0, (1, 0): 9.0, (2, 3): 5.0, (1, 2): 4.0, (4, 5): 1.0})
    ms = matchings(d, 3)
    pairs = [{(u, v) for u, v in enumerate(p) if v is not None} for p, _ in ms]
    assert {(0, 1), (1, 0), (2, 3), (3, 2), (4, 5), (5, 4)} == pairs[0]
    assert (1, 2) in pairs[1] and (0, 1) not in pairs[1]  # served pairs are left out
    for p, _ in ms:
        assert all(p[v] == u for u, v in enumerate(p) if v is not None)  # an involution: duplex pairs


@pytest.mark.parametrize("n", range(3, 64))
def test_topology_finder_gives_each_server_d_circuits_and_loop_free_routes_that_reach_everyone(n: int) -> None:
    rng = random.Random(n)
    for model, d in (("dlrm", 3), ("transformer", 3), ("transformer", 4)):
        stages = next(k for k in (4, 2, 1) if n % k == 0)
        job = parse_job({**(DLRM if model == "dlrm" else TRANSFORMER), "servers": n,
                         "strategy": {"tables": [rng.randrange(n) for _ in range(4)]} if model == "dlrm"
                         else {"stages": stages, "placement": rng.sample(range(n), n)}})
        try:
            found = find_wiring(demand(job, job.strategy), d, nic_mbps=10.0)
        except ConfigError as exc:
            assert "no division" in str(exc) or "strides" in str(exc)
            continue
        w = found.wiring
        assert w.degree == d and found.rings + found.matchings == d and w.connected
        assert found.tried[found.matchings] == pytest.approx(found.timing.comm_ms)
        assert all(ms is None or ms >= found.timing.comm_ms - 1e-6 for ms in found.tried.values())
        for s, t in itertools.permutations(range(n), 2):
            path = w.path(s, t)
            assert len(path) - 1 == w.distance(s, t) and len(set(path)) == len(path)  # shortest, no loop
            assert all(any(p[a] == b for p in w.perms) for a, b in itertools.pairwise(path))  # over circuits


def test_the_model_gives_a_mutable_all_reduce_d_rings_of_bandwidth() -> None:
    n, d, mb, mbps = 16, 4, 1.0, 8.0
    one = wiring_time(Demand(n, (AllReduceGroup(tuple(range(n)), mb),), {}), Wiring(n, (stride_perm(n, 1),)),
                      nic_mbps=mbps)
    four = wiring_time(Demand(n, (AllReduceGroup(tuple(range(n)), mb),), {}), totient_wiring(n, d), nic_mbps=mbps)
    assert one.allreduce_ms == pytest.approx(2 * 15 / 16 * mb * 8e3 / mbps)
    assert four.allreduce_ms == pytest.approx(one.allreduce_ms / d) and four.tax == 1.0
    tree = fat_tree_time(Demand(n, (AllReduceGroup(tuple(range(n)), mb),), {}), server_mbps=d * mbps)
    assert tree.allreduce_ms == pytest.approx(four.allreduce_ms)  # equal bandwidth, no tax: even


def test_the_strategy_search_never_worsens_and_the_alternation_keeps_its_best_round() -> None:
    job = parse_job({**TRANSFORMER, "servers": 16, "strategy": {"stages": 4, "placement": list(range(16))[::-1]}})
    wiring = totient_wiring(16, 3)

    def score(s: Strategy):
        return wiring_time(demand(job, s), wiring, nic_mbps=5.0, compute_ms=job.compute_ms)

    start = score(job.strategy).total_ms
    found, timing, evals = search_strategy(job, job.strategy, score, max_evals=300)
    assert timing.total_ms <= start and evals <= 300 and job.check(found) == found
    rounds = co_optimize(job, 3, nic_mbps=5.0, max_evals=300)
    assert rounds[0].step == "strategy search" and rounds[0].wiring.labels == wiring.labels
    kept = best_round(rounds)
    assert kept.timing.total_ms <= rounds[0].timing.total_ms
    searches = [r.timing.total_ms for r in rounds if r.step == "strategy search"]
    assert all(b < a for a, b in itertools.pairwise(searches[:-1]))  # every round but the last improved
    assert co_optimize(job, 3, nic_mbps=5.0, max_evals=300) == rounds  # seeded: the same every time


def test_moves_cover_placements_and_pipeline_depths() -> None:
    job = parse_job({**TRANSFORMER, "servers": 6, "strategy": {"stages": 2}})
    ms = list(moves(job, job.strategy, random.Random(0)))
    assert len(ms) == 15 + 3  # every swap of 6 servers, and depths 1, 3, 6
    assert {m.stages for m in ms} == {1, 2, 3, 6}


def test_the_shipped_transformer_job_gets_a_topology_of_its_own_and_a_shorter_iteration() -> None:
    from pathlib import Path

    job = load_job(Path(__file__).parents[2] / "topologies/jobs/topoopt-transformer.yaml")
    rounds = co_optimize(job, 4, nic_mbps=5.0)
    kept = best_round(rounds)
    assert kept.round > 0 and "per group" in " ".join(kept.wiring.labels)
    assert kept.timing.total_ms < 0.9 * rounds[0].timing.total_ms


def test_duplex_circuits_wire_pairs_both_ways_and_a_ring_takes_two_switches() -> None:
    w = totient_wiring(16, 4, duplex=True)
    assert all(w.is_involution(i) for i in range(4)) and w.connected
    assert all(w.distance(s, t) == w.distance(t, s) for s in range(16) for t in range(16))  # both ways alike
    rings = all_group_rings(w, [range(16)])[0]
    assert len(rings) == 4 and all(r.direct for r in rings)  # strides 1 and 7, each both ways
    assert {r.order[1] for r in rings} == {1, 15, 7, 9}
    t = wiring_time(Demand(16, (AllReduceGroup(tuple(range(16)), 1.0),), {}), w, nic_mbps=8.0)
    assert t.allreduce_ms == pytest.approx(wiring_time(Demand(16, (AllReduceGroup(tuple(range(16)), 1.0),), {}),
                                                       totient_wiring(16, 4), nic_mbps=8.0).allreduce_ms)
    with pytest.raises(ConfigError, match="even degree"):
        totient_wiring(16, 3, duplex=True)
    job = parse_job({**TRANSFORMER, "servers": 16, "strategy": {"stages": 4}})
    found = find_wiring(demand(job, job.strategy), 4, nic_mbps=5.0, duplex=True)
    assert all(found.wiring.is_involution(i) for i in range(4)) and found.rings % 2 == 0


@pytest.mark.parametrize(("n", "d", "duplex"), [(16, 3, False), (31, 4, False), (16, 4, True)])
def test_bulk_link_loads_match_the_routes_one_by_one(n: int, d: int, duplex: bool) -> None:
    import numpy as np

    w = totient_wiring(n, d, duplex=duplex)
    rng = np.random.default_rng(n)
    weights = rng.random((n, n))
    loads, injected, carried = w.link_loads(weights)
    naive = np.zeros(n * d)
    for s in range(n):
        for t in range(n):
            if s != t:
                for v, nic in w.links(s, t):
                    naive[v * d + nic] += weights[s, t]
    assert np.allclose(loads, naive)
    assert injected == pytest.approx(weights.sum() - np.trace(weights))
    assert carried == pytest.approx(sum(weights[s, t] * w.distance(s, t) for s in range(n) for t in range(n) if s != t))
