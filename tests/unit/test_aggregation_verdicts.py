"""The aggregation experiment's pure side: the job every GPU joins, bad settings named, the
summary and the verdicts (decided only where the machine held), the report and the plot."""

from __future__ import annotations

import pytest

from controller.aggregate import resolve_job
from controller.errors import ConfigError
from controller.experiments.aggregation import (
    AggregationSettings,
    aggregation_job,
    summarize,
    verdicts,
)
from controller.experiments.aggregation_report import nic_bytes_model, plot_aggregation, report
from controller.experiments.fidelity import all_decided
from controller.experiments.rail_only import ExperimentConfig
from controller.topology import rail_fat_tree, rail_only


def test_every_gpu_is_a_worker_of_its_rails_switch() -> None:
    for topo in (rail_only(4, 4), rail_fat_tree(4, 4, spines=2)):
        job = aggregation_job(topo, AggregationSettings(slots=32))
        assert [w.rank for w in job.workers] == list(range(16))
        assert [(w.host, w.rail) for w in job.workers[:5]] == [("s0", 0), ("s0", 1), ("s0", 2), ("s0", 3), ("s1", 0)]
        groups = resolve_job(job, topo).groups
        assert [len(g.workers) for g in groups] == [4, 4, 4, 4]
        assert [w.rank for w in groups[1].workers] == [1, 5, 9, 13]


@pytest.mark.parametrize(("kwargs", "key"), [({"sizes_kb": ()}, "sizes_kb"), ({"sizes_kb": (0,)}, "sizes_kb"),
                                              ({"slots": 0}, "slots"), ({"slots": 1025}, "slots"),
                                              ({"job": 256}, "job"), ({"loss_every": 1}, "loss_every")])
def test_bad_settings_name_the_value(kwargs: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        AggregationSettings(**kwargs).validate()


def _rows(innet_s: float, cpu: float = 0.3) -> list[dict]:
    rows = []
    for it, jitter in enumerate((0.0, 0.01, -0.01)):
        for op, s in (("allreduce", 4.0), ("hier_allreduce", 1.0), ("innet_allreduce", innet_s)):
            rows.append({"fabric": "rail-only", "op": op, "kb": 1024, "iter": it, "ok": True, "seconds": s + jitter,
                         "nic_bytes": 1000.0, "busiest_nic_bytes": 2000.0, "machine_cpu": cpu, "switch_cpu": 0.1,
                         "busiest_switch": "rail0", "aggregation": {"retransmitted": 2} if op.startswith("innet") else None})
    return rows


def test_a_comparison_is_decided_only_where_the_machine_held() -> None:
    spreads, judged = verdicts(_rows(0.8))
    assert [v.comparison for v in judged] == ["rail-only, 1024 KiB, in-network / ring",
                                              "rail-only, 1024 KiB, in-network / hierarchical"]
    assert all(v.decided for v in judged) and judged[1].text() == "in-network is faster"
    assert 0.79 < spreads["rail-only, 1024 KiB, in-network / hierarchical"]["mean"] < 0.81
    _, busy = verdicts(_rows(0.8, cpu=0.9))
    assert not any(v.decided for v in busy) and "machine CPU 90% > 60%" in busy[0].text()


def test_the_summary_report_and_plot(tmp_path) -> None:
    rows = _rows(0.8)
    (ring, hier, innet) = summarize(rows)
    assert (ring["op"], hier["op"], innet["op"]) == ("allreduce", "hier_allreduce", "innet_allreduce")
    assert innet["median_s"] == 0.8 and innet["retransmitted"] == 6 and innet["ok"] == 3
    text, judged, data = report(ExperimentConfig(gpus=16, rails=4, iterations=3), AggregationSettings(), rows, {})
    assert set(data) == {"allreduces", "spreads", "runs"}
    assert "in-network / hierarchical: 0.80 [" in text  # the verdicts' lines follow it (core.write_outcome)
    assert all_decided(judged)
    assert plot_aggregation(rows, tmp_path / "a.png", title="t", judged=judged).stat().st_size > 10_000


def test_the_bytes_model_per_busiest_nic() -> None:
    size = 1 << 20
    assert nic_bytes_model("allreduce", size, 4, 4) == 2 * 15 / 16 * size
    assert nic_bytes_model("hier_allreduce", size, 4, 4) == 2 * 3 / 4 * size / 4
    assert nic_bytes_model("hier_allreduce", size, 1, 4) == 0.0, "one server: no rail step"
    assert nic_bytes_model("innet_allreduce", size, 4, 4) == (1024 + 1) * 314


def test_the_shadow_verdict_marks_each_call_and_says_what_is_missing() -> None:
    from controller.experiments.aggregation import shadow_verdicts

    rows = [{"op": "innet_allreduce"}, {"op": "innet_allreduce"}]
    calls = [(rows[0], 64, {"abc"}), (rows[1], 64, {"abc"})]
    result = shadow_verdicts({}, calls, rails=1)  # the shadow recorded nothing
    assert result["identical"] == 0 and "error" in result
    assert all(r["shadow"].startswith("missing: ") for r in rows)
