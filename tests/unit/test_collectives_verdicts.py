"""The collectives experiment's pure side: Open MPI's decision table, the configuration's
checks, the model of each algorithm's traffic, the verdicts and the report."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from controller.errors import ConfigError
from controller.experiments.collectives import CollectivesConfig, model_time, summarize, verdicts
from controller.experiments.collectives_report import plot_sizes, report
from controller.experiments.fidelity import TOO_FEW_RUNS, TOO_SPREAD
from controller.experiments.ompi_tuned import ALGORITHMS, default_algorithm, forced_mca
from controller.launch.mpi import mpirun_argv
from controller.launch.placement import place
from controller.topology import rail_only


@pytest.mark.parametrize(("collective", "ranks", "size", "expected"), [
    # v4.1.4's coll_tuned_decision_fixed.c, commutative allreduce
    ("allreduce", 16, 4095, "recursive_doubling"), ("allreduce", 16, 4096, "rabenseifner"),
    ("allreduce", 16, 63, "segmented_ring"), ("allreduce", 2, 100_000, "segmented_ring"),
    ("allreduce", 8, 8191, "recursive_doubling"), ("allreduce", 200, 100_000, "nonoverlapping"),
    # the all-to-all's bytes are per peer: 16 ranks x 16 KiB = a 256 KiB buffer
    ("alltoall", 16, 16 * 8191, "linear_sync"), ("alltoall", 16, 16 * 16384, "linear"),
    ("alltoall", 16, 16 * 262144, "linear"), ("alltoall", 16, 16 * 524288, "linear_sync"),
    ("alltoall", 16, 16 * 256, "modified_bruck"), ("alltoall", 10, 10 * 1000, "linear_sync"),
    ("alltoall", 2, 2 * 2_000_000, "pairwise"),
])
def test_default_algorithm_follows_open_mpi_4_1_4(collective: str, ranks: int, size: int, expected: str) -> None:
    assert default_algorithm(collective, ranks, size) == expected


def test_every_algorithm_can_be_forced_and_a_wrong_one_is_named() -> None:
    for collective, names in ALGORITHMS.items():
        for number, name in names.items():
            assert forced_mca(collective, name)[f"coll_tuned_{collective}_algorithm"] == str(number)
    with pytest.raises(ConfigError, match="spiral"):
        forced_mca("allreduce", "spiral")
    with pytest.raises(ConfigError, match="gather"):
        default_algorithm("gather", 4, 1024)


@pytest.mark.parametrize(("change", "match"), [
    ({"sizes_kb": ()}, "at least one size"), ({"sizes_kb": (1,), "gpus": 12}, "multiple of 8 bytes"),
    ({"sizes_kb": (64, 64)}, "differ"), ({"repetitions": 1}, "at least 2"),
    ({"forced": ("spiral", "pairwise")}, "spiral"), ({"idle_us": -1}, ">= 0"),
    ({"mca": (("btl_tcp_eager_limit", ""),)}, "NAME=VALUE"),
    ({"gpus": 8, "rails": 3}, "multiple of the rail count"),
])
def test_config_rejects_bad_values_naming_them(change: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        CollectivesConfig(**change).validate()


def test_model_follows_each_algorithm_s_bytes_on_the_nics() -> None:
    cfg = CollectivesConfig(rate_mbps=8.0)
    size = 1 << 20
    ring = model_time(cfg, "allreduce", "open-mpi", "ring (forced)", size)
    raben = model_time(cfg, "allreduce", "open-mpi", "rabenseifner (default)", size)
    assert ring is not None and raben is not None
    assert ring / raben == pytest.approx((2 * 15 / 16) / (3 / 8))  # every ring edge vs one rail's 2 (d-1)/d of S/g
    a2a = model_time(cfg, "alltoall", "open-mpi", "pairwise (forced)", size)
    assert a2a == pytest.approx(raben * (12 / 16) / (3 / 8))  # the off-server 12/16 of the buffer
    hier = model_time(cfg, "alltoall", "mlfabric", "hierarchical", size)
    assert hier is not None and hier > a2a  # the intra-server forwarding comes first
    assert model_time(CollectivesConfig(gpus=12, rails=4), "allreduce", "open-mpi", "rabenseifner (default)",
                      size) is None  # 3 servers: no power of two, no model written
    assert model_time(cfg, "allreduce", "open-mpi", "basic_linear (forced)", size) is None


def _rows(fabric_times: dict[str, list[float]], *, cpu: float = 0.3, size: int = 1 << 20) -> list[dict]:
    rows = []
    for fabric, times in fabric_times.items():
        for rep, t in enumerate(times):
            rows.append({"fabric": fabric, "collective": "allreduce", "bytes": size, "library": "open-mpi",
                         "algorithm": "rabenseifner (default)", "block": f"{fabric}/default/0", "rep": rep,
                         "ok": True, "seconds": t, "machine_cpu": cpu, "switch_cpu": 0.2, "busiest_switch": "rail0"})
    return rows


def test_rail_only_against_the_fat_tree_is_decided_only_when_the_machine_held() -> None:
    cfg = CollectivesConfig(sizes_kb=(1024,), project=False, repetitions=3)
    rows = _rows({"rail-only": [1.0, 1.01, 0.99], "fat-tree": [1.0, 1.0, 1.0]})
    (v, spread), = [x for name, x in verdicts(rows, cfg).items() if name.startswith("allreduce 1024 KiB:")]
    assert v.decided and v.finding == "rail-only is even" and spread["n"] == 3
    assert v.intervals == 2  # one block per fabric, not one per repetition
    busy = _rows({"rail-only": [1.0, 1.01, 0.99], "fat-tree": [1.0, 1.0, 1.0]}, cpu=0.9)
    (v, _), = [x for name, x in verdicts(busy, cfg).items() if name.startswith("allreduce 1024 KiB:")]
    assert not v.decided and "machine CPU 90%" in v.text()


def test_report_names_every_series_and_its_model(tmp_path: Path) -> None:
    cfg = CollectivesConfig(sizes_kb=(1024,), project=False, repetitions=3, rate_mbps=10.0)
    rows = _rows({"rail-only": [0.2, 0.21, 0.22], "fat-tree": [0.2, 0.2, 0.2]})
    text, judged, data = report(rows, cfg)
    assert "rabenseifner (default)" in text and "1 MiB" in text and "-37%" in text  # 0.2 s against 0.317
    assert len(judged) == 4  # two collectives' defaults and forced algorithms
    assert len(data["ratios"]) == 4 and len(data["summary"]) == 2
    # ratios 1.00, 1.05, 1.10: too spread to call; no forced run in these rows: too few runs, not a finding
    assert judged[0].outcome == TOO_SPREAD and judged[2].outcome == TOO_FEW_RUNS and not judged[2].finding
    (s,) = [s for s in summarize(rows, cfg) if s["fabric"] == "fat-tree"]
    assert s["median_s"] == 0.2 and not math.isnan(s["model_s"])
    assert plot_sizes(rows, cfg, tmp_path / "p.png", title="t").stat().st_size > 1000


def test_waiting_ranks_sleep_only_when_asked() -> None:
    p = place(rail_only(2, 2), gpus=True)
    spin = mpirun_argv(p, ["j"], agent="/a", hostfile_path="/h")
    assert "mpi_yield_when_idle" not in spin and not any(x.startswith("LD_PRELOAD") for x in spin)
    sleep = mpirun_argv(p, ["j"], agent="/a", hostfile_path="/h", idle_library="/i.so", idle_us=300)
    assert sleep.count("LD_PRELOAD=/i.so") == 4 and sleep.count("MLFABRIC_MPI_IDLE_US=300") == 4
