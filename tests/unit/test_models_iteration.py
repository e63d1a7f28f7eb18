"""Collective formulas against hand computations, and the iteration-time model's behaviour."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from controller.models import collectives as co
from controller.models.iteration import (
    FABRICS,
    Hardware,
    LLMConfig,
    Parallelism,
    iteration_time,
    megatron_flops,
    moe_alltoall_overhead,
    six_nd_flops,
)
from controller.models.presets import PRESETS, preset
from controller.models.report import (
    cost_rows,
    format_cost_table,
    format_iteration_table,
    iteration_rows,
    write_report,
)

GB = 1e9


# --- collectives ------------------------------------------------------------------------

def test_ring_allreduce_by_hand() -> None:
    # 1 GB over 8 GPUs at 50 GB/s: 2 * 7/8 * 20 ms = 35 ms; + 14 steps of 10 us.
    assert co.ring_allreduce_time(1 * GB, 8, 50 * GB) == pytest.approx(0.035)
    assert co.ring_allreduce_time(1 * GB, 8, 50 * GB, 10e-6) == pytest.approx(0.035 + 14 * 10e-6)
    assert co.ring_allreduce_time(1 * GB, 1, 50 * GB) == 0.0
    assert co.ring_reduce_scatter_time(1 * GB, 4, 50 * GB) == pytest.approx(0.015)
    assert co.ring_allgather_time(1 * GB, 4, 50 * GB) == pytest.approx(0.015)


def test_hierarchical_allreduce_by_hand() -> None:
    # 8 GB, 8 GPUs per domain, 4 domains: NVLink RS + AG = 2 * 7/8 * 8/400 = 35 ms;
    # rail all-reduce of the 1 GB shard over 4 = 2 * 3/4 * 1/50 = 30 ms.
    assert co.hierarchical_allreduce_time(8 * GB, 8, 4, 400 * GB, 50 * GB) == pytest.approx(0.065)
    # One GPU per domain: a plain ring over the NICs.
    assert co.hierarchical_allreduce_time(8 * GB, 1, 16, 400 * GB, 50 * GB) == pytest.approx(
        co.ring_allreduce_time(8 * GB, 16, 50 * GB))


def test_p2p_by_hand() -> None:
    assert co.p2p_time(100e6, 50 * GB) == pytest.approx(2e-3)


def test_alltoall_direct_and_hierarchical_by_hand() -> None:
    # 64 GPUs, 8 per domain, each sends 64 MB (1 MB per peer).
    size, group, g, nvl, nic = 64e6, 64, 8, 450 * GB, 50 * GB
    remote = 56e6 / nic      # 56 peers in other domains
    local = 7e6 / nvl        # 7 peers in my domain
    forward = 56e6 / nvl     # phase 1: everything for the other 7 rails, 7/8 of 64 MB
    assert co.alltoall_direct_time(size, group, g, nvl, nic) == pytest.approx(max(local, remote))
    assert co.alltoall_hierarchical_time(size, group, g, nvl, nic) == pytest.approx(forward + remote)
    assert co.alltoall_overhead(size, group, g, nvl, nic) == pytest.approx(forward / remote)


def test_alltoall_overhead_limits() -> None:
    # One GPU per domain: nothing to forward. A group inside one domain: no network at all.
    assert co.alltoall_overhead(1 * GB, 64, 1, 450 * GB, 50 * GB) == pytest.approx(0.0)
    assert co.alltoall_overhead(1 * GB, 8, 8, 450 * GB, 50 * GB) == pytest.approx(0.0)
    # Large groups: nic/nvlink * (g-1)/g = 1/9 * 7/8.
    assert co.alltoall_overhead(1 * GB, 2**20, 8, 450 * GB, 50 * GB) == pytest.approx(7 / 72, rel=1e-4)
    with pytest.raises(ValueError):
        co.alltoall_direct_time(1 * GB, 12, 8, 450 * GB, 50 * GB)


# --- FLOPs -------------------------------------------------------------------------------

GPT3, GPT3_PAR = PRESETS["gpt3-175b"]


@pytest.mark.parametrize("recompute", [True, False])
def test_flop_count_is_megatrons_formula_for_a_dense_gpt(recompute: bool) -> None:
    tokens = GPT3_PAR.global_batch * GPT3.seq_len
    mine = GPT3.train_flops_per_token(recompute) * tokens
    assert mine == pytest.approx(megatron_flops(GPT3_PAR.global_batch, GPT3.seq_len, GPT3.layers,
                                                GPT3.hidden, GPT3.vocab, recompute), rel=1e-12)


def test_six_nd_is_close_without_recompute() -> None:
    assert GPT3.params == pytest.approx(175e9, rel=0.01)
    tokens = GPT3_PAR.global_batch * GPT3.seq_len
    # 6ND leaves out attention scores (s/6h ~ 3%) and counts the embedding: within 5%.
    assert GPT3.train_flops_per_token(False) * tokens == pytest.approx(six_nd_flops(GPT3.params, tokens), rel=0.05)


def test_moe_flops_count_top_k_experts_only() -> None:
    m = PRESETS["mixtral-8x7b"][0]
    assert m.params == pytest.approx(46.7e9, rel=0.01)
    dense = dataclasses.replace(m, experts=1, top_k=1)
    two = dataclasses.replace(dense, ffn_hidden=2 * m.ffn_hidden)  # same FLOPs as top-2 of 8
    assert m.train_flops_per_token() == pytest.approx(two.train_flops_per_token())


# --- iteration time ----------------------------------------------------------------------

TINY = LLMConfig("tiny", layers=4, hidden=1024, seq_len=1024, vocab=1000, ffn_hidden=4096)


def test_compute_only_iteration_by_hand() -> None:
    par = Parallelism(tp=1, pp=1, dp=1, global_batch=4, micro_batch=2)
    hw = Hardware(peak_tflops=100, efficiency=0.5)
    t = iteration_time(TINY, par, hw)
    flops = megatron_flops(4, 1024, 4, 1024, 1000)
    assert t.compute_s == pytest.approx(flops / 50e12)
    assert t.total_s == t.compute_s and t.bubble_s == 0


def test_dp_time_is_a_rail_ring_when_tp_fills_the_domain() -> None:
    t = iteration_time(GPT3, GPT3_PAR)
    grads = GPT3.params / (GPT3_PAR.tp * GPT3_PAR.pp) * 2
    assert t.dp_s == pytest.approx(co.ring_allreduce_time(grads, GPT3_PAR.dp, 50 * GB))


def test_tp_time_counts_six_allreduces_per_layer_and_micro_batch() -> None:
    t = iteration_time(GPT3, GPT3_PAR)
    slots = GPT3_PAR.micro_batches + GPT3_PAR.pp - 1
    ar = co.ring_allreduce_time(2048 * 12288 * 2, 8, 450 * GB)
    assert t.tp_s == pytest.approx(slots * (96 // 8) * 6 * ar)
    assert t.bubble_s == pytest.approx(t.compute_s * 7 / slots)


@pytest.mark.parametrize("name", [n for n, (m, _) in PRESETS.items() if not m.is_moe])
def test_rail_only_equals_fat_tree_for_dense_models(name: str) -> None:
    model, par = preset(name)
    ro, ft = (iteration_time(model, par, fabric=f) for f in FABRICS)
    assert dataclasses.replace(ro, fabric="fat-tree") == ft
    assert ro.comm_s > 0


def test_more_bandwidth_means_less_time() -> None:
    model, par = preset("llama2-70b")
    base = iteration_time(model, par)
    faster_nic = iteration_time(model, par, Hardware(nic_gbps=800))
    faster_nvl = iteration_time(model, par, Hardware(nvlink_GBps=900))
    assert faster_nic.dp_s < base.dp_s and faster_nic.pp_s < base.pp_s
    assert faster_nic.total_s < base.total_s
    assert faster_nvl.tp_s < base.tp_s and faster_nvl.total_s < base.total_s
    assert iteration_time(model, par, Hardware(efficiency=0.6)).total_s < base.total_s


@pytest.mark.parametrize("name", [n for n, (m, _) in PRESETS.items() if m.is_moe])
def test_moe_alltoall_costs_more_on_rail_only(name: str) -> None:
    model, par = preset(name)
    a2a, iteration = moe_alltoall_overhead(model, par)
    assert 0.05 < a2a < 0.2          # the paper reports 8.2-11.2% on all-to-all time
    assert 0 < iteration < a2a       # the rest of the iteration is unchanged
    ro, ft = (iteration_time(model, par, fabric=f) for f in FABRICS)
    assert ro.moe_s > ft.moe_s and ro.dp_s == ft.dp_s and ro.tp_s == ft.tp_s


def test_moe_overhead_of_the_64_expert_preset_is_one_ninth() -> None:
    # EP 64 over 8 domains of 8: overhead = (7/8) / (56/64) * 50/450 = 1/9.
    a2a, _ = moe_alltoall_overhead(*preset("gshard-like-64e"))
    assert a2a == pytest.approx(1 / 9)


def test_misaligned_pipeline_pays_forwarding_on_rail_only() -> None:
    par = Parallelism(tp=2, pp=2, dp=2, global_batch=8)  # next stage 4 ranks away: another rail
    ro, ft = (iteration_time(TINY, par, fabric=f) for f in FABRICS)
    assert ro.pp_s > ft.pp_s > 0


@pytest.mark.parametrize("par", [Parallelism(tp=3, pp=1, dp=1, global_batch=1),
                                 Parallelism(tp=1, pp=3, dp=1, global_batch=1),
                                 Parallelism(tp=1, pp=1, dp=2, global_batch=3)])
def test_invalid_plans_are_rejected(par: Parallelism) -> None:
    with pytest.raises(ValueError):
        iteration_time(TINY, par)


def test_unknown_fabric_and_preset() -> None:
    with pytest.raises(ValueError):
        iteration_time(TINY, Parallelism(1, 1, 1, 1), fabric="torus")  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        preset("gpt-5")


# --- report ------------------------------------------------------------------------------

def test_tables_and_report_files(tmp_path: Path) -> None:
    from controller.models.params import load_cost_params

    rows = cost_rows(load_cost_params(), [128, 256, 4096], hb_domains=(8, 256))
    assert [(r["gpus"], r["hb_domain"]) for r in rows] == [(128, 8), (256, 8), (4096, 8), (256, 256), (4096, 256)]
    assert "36.2%" in format_cost_table(rows)
    its = iteration_rows()
    assert len(its) == 2 * len(PRESETS)
    assert "gpt3-175b" in format_iteration_table(its)
    paths = write_report(tmp_path / "out", gpu_counts=[128, 1024, 8192])
    assert set(paths) == {"cost_table", "cost_json", "iteration_table", "iteration_json", "cost_plot", "iteration_plot"}
    for p in paths.values():
        assert p.is_file() and p.parent == tmp_path / "out"
    assert paths["cost_plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert paths["iteration_plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
