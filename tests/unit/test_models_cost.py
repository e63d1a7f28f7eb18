"""The rail-only / fat-tree cost model: hand-checked switch counts, savings, strict parameter loading."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from controller.errors import ConfigError
from controller.models.cost import (
    ClusterSpec,
    ComponentCosts,
    clos_tiers,
    compare,
    fat_tree_bill,
    rail_only_bill,
)
from controller.models.params import DEFAULT_COST_FILE, load_cost_params

# One dollar per switch, nothing else: costs count switches.
SWITCHES_ONLY = ComponentCosts(1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@pytest.fixture(scope="module")
def params():
    return load_cost_params()


def test_clos_tier_thresholds_radix_64() -> None:
    assert clos_tiers(64, 64) == (1,)
    assert clos_tiers(65, 64) == (3, 2)              # two tiers: R/2 down per leaf
    assert clos_tiers(2048, 64) == (64, 32)          # R^2/2: the largest two-tier Clos
    assert clos_tiers(2049, 64) == (65, 65, 33)      # one more GPU: three tiers
    assert clos_tiers(65536, 64) == (2048, 2048, 1024)  # R^3/4
    assert len(clos_tiers(65537, 64)) == 4


def test_8_rails_of_16_gpus_is_8_rail_switches_and_no_spine() -> None:
    spec = ClusterSpec(gpus=128, hb_domain=8, radix=64)
    ro = rail_only_bill(spec, SWITCHES_ONLY)
    assert ro.tiers == (("leaf", 8),)
    assert ro.tier("spine") == 0
    assert (ro.switches, ro.host_links, ro.switch_links) == (8, 128, 0)
    assert ro.transceivers == 256 and ro.cables == 128
    # Fat-tree: the same 8 rail leaves (16 GPUs + 16 uplinks each), 128 uplinks on 2 spines.
    ft = fat_tree_bill(spec, SWITCHES_ONLY)
    assert ft.tiers == (("leaf", 8), ("spine", 2))
    assert (ft.switch_links, ft.transceivers) == (128, 128 * 2 + 128 * 2)


def test_512_gpus_one_switch_per_rail_vs_two_tier_fat_tree() -> None:
    spec = ClusterSpec(gpus=512)
    assert rail_only_bill(spec, SWITCHES_ONLY).tiers == (("leaf", 8),)
    ft = fat_tree_bill(spec, SWITCHES_ONLY)
    assert ft.tiers == (("leaf", 16), ("spine", 8)) and ft.switch_links == 512


def test_4096_gpus_per_rail_clos_vs_three_tier_fat_tree() -> None:
    spec = ClusterSpec(gpus=4096)
    ro, ft = rail_only_bill(spec, SWITCHES_ONLY), fat_tree_bill(spec, SWITCHES_ONLY)
    # 512 GPUs per rail: 16 leaves + 8 spines per rail, 8 rails.
    assert ro.tiers == (("leaf", 128), ("spine", 64))
    assert ro.switch_links == 4096 and ro.transceivers == 2 * 4096 + 2 * 4096
    # 128 leaves are more than one spine tier of radix 64 can reach: spine + core.
    assert ft.tiers == (("leaf", 128), ("spine", 128), ("core", 64))
    assert ft.switch_links == 2 * 4096 and ft.transceivers == 2 * 4096 + 4 * 4096


def test_oversubscribed_fat_tree_has_fewer_spines() -> None:
    # 3:1 leaves: 48 down, 16 up. 128 GPUs per rail -> leaves of 43, 43, 42 GPUs -> 15+15+14
    # uplinks per rail -> 352 uplinks -> 6 spines.
    ft = fat_tree_bill(ClusterSpec(gpus=1024, oversubscription=3.0), SWITCHES_ONLY)
    assert ft.tiers == (("leaf", 24), ("spine", 6)) and ft.switch_links == 352
    full = fat_tree_bill(ClusterSpec(gpus=1024), SWITCHES_ONLY)
    assert full.switches > ft.switches


def test_cost_and_power_arithmetic_by_hand() -> None:
    prices = ComponentCosts(switch_price_usd=100, switch_power_w=10, switch_transceiver_price_usd=2,
                            switch_transceiver_power_w=1, nic_transceiver_price_usd=3,
                            nic_transceiver_power_w=2, cable_price_usd=5, cable_power_w=0)
    ft = fat_tree_bill(ClusterSpec(gpus=128), prices)
    # 10 switches; 128 host links (2+3+5) and 128 switch links (2+2+5).
    assert ft.cost_usd == 10 * 100 + 128 * 10 + 128 * 9
    assert ft.power_w == 10 * 10 + 128 * (1 + 2) + 128 * 2
    ro = rail_only_bill(ClusterSpec(gpus=128), prices)
    assert ro.cost_usd == 8 * 100 + 128 * 10
    c = compare(ClusterSpec(gpus=128), prices)
    assert c.cost_savings == pytest.approx(1 - ro.cost_usd / ft.cost_usd)


def test_price_per_port_is_the_same_as_price_per_switch() -> None:
    per_switch = ComponentCosts(6400, 640, 1, 1, 1, 1, 1)
    per_port = dataclasses.replace(per_switch, switch_price_usd=0, switch_power_w=0,
                                   switch_price_per_port_usd=100, switch_power_per_port_w=10)
    spec = ClusterSpec(gpus=4096)
    for bill in (rail_only_bill, fat_tree_bill):
        assert bill(spec, per_port).cost_usd == bill(spec, per_switch).cost_usd
        assert bill(spec, per_port).power_w == bill(spec, per_switch).power_w


@pytest.mark.parametrize("kwargs", [{"gpus": 100, "hb_domain": 8}, {"gpus": 0}, {"gpus": 64, "radix": 63},
                                    {"gpus": 64, "oversubscription": 0.5}])
def test_cluster_spec_rejects_bad_values(kwargs) -> None:
    with pytest.raises(ValueError):
        ClusterSpec(**kwargs)


# What this model gives with the default parameter file (radix 64, 8-GPU HB domains).
# Savings come only where rail-only needs fewer tiers than the fat-tree. At 1024, 2048 and
# 32768 GPUs the per-rail Clos needs as many tiers as the whole fat-tree, so nothing is saved;
# the paper's 38-77% is not reproduced at those sizes with 8-GPU HB domains.
EXPECTED_K8 = {
    128: (0.343, 0.300), 256: (0.434, 0.407), 512: (0.566, 0.585), 1024: (0.0, 0.0),
    2048: (0.0, 0.0), 4096: (0.362, 0.369), 8192: (0.362, 0.369), 16384: (0.362, 0.369),
    32768: (0.0, 0.0),
}


@pytest.mark.parametrize("gpus", sorted(EXPECTED_K8))
def test_default_savings_with_8_gpu_hb_domains(params, gpus: int) -> None:
    c = compare(params.spec(gpus, 8), params.costs)
    assert (c.cost_savings, c.power_savings) == pytest.approx(EXPECTED_K8[gpus], abs=1e-3)


@pytest.mark.parametrize("gpus", [4096, 8192, 16384, 32768])
def test_savings_near_the_paper_range_with_256_gpu_hb_domains(params, gpus: int) -> None:
    # Large HB domains (the paper's GH200-class case): every size removes a tier.
    # Paper: 38-77% cost, 37-75% power. This model: 36.2-72.3% cost, 36.9-73.8% power.
    c = compare(params.spec(gpus, 256), params.costs)
    assert 0.36 <= c.cost_savings <= 0.77
    assert 0.36 <= c.power_savings <= 0.75


def test_savings_whenever_rail_only_drops_a_tier(params) -> None:
    seen = []
    for k in (8, 16, 32, 64, 256):
        for n in (2**e for e in range(11, 16)):
            c = compare(params.spec(n, k), params.costs)
            if len(c.rail_only.tiers) < len(c.fat_tree.tiers):
                seen.append(c.cost_savings)
                assert 0.36 <= c.cost_savings <= 0.77, (n, k)
                assert 0.36 <= c.power_savings <= 0.75, (n, k)
            else:
                assert c.cost_savings == pytest.approx(0.0, abs=1e-9)
    assert min(seen) == pytest.approx(0.362, abs=1e-3) and max(seen) == pytest.approx(0.723, abs=1e-3)


def test_rail_only_never_costs_more_than_a_full_bisection_fat_tree(params) -> None:
    for k in (4, 8, 16):
        for n in (2**e for e in range(5, 17)):
            c = compare(params.spec(n, k), params.costs)
            assert c.rail_only.cost_usd <= c.fat_tree.cost_usd
            assert c.rail_only.power_w <= c.fat_tree.power_w


def test_leaving_out_host_links_raises_savings(params) -> None:
    fabric_only = dataclasses.replace(params.costs, count_host_links=False)
    spec = params.spec(8192, 8)
    assert compare(spec, fabric_only).cost_savings > compare(spec, params.costs).cost_savings
    assert rail_only_bill(spec, fabric_only).host_links == 0


# --- the parameter file -------------------------------------------------------------------

def test_default_file_loads_with_a_source_for_every_number(params) -> None:
    assert params.radix == 64 and params.port_gbps == 400
    assert params.file == str(DEFAULT_COST_FILE)
    assert len(params.sources) == 13
    assert all(s.strip() for s in params.sources.values())


def _write(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "costs.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _default_doc() -> dict:
    return yaml.safe_load(DEFAULT_COST_FILE.read_text(encoding="utf-8"))


def test_unknown_key_is_a_config_error_naming_file_key_and_value(tmp_path: Path) -> None:
    doc = _default_doc()
    doc["switch"]["colour"] = "purple"
    path = _write(tmp_path, doc)
    with pytest.raises(ConfigError) as info:
        load_cost_params(path)
    err = info.value
    assert (err.file, err.key, err.value) == (str(path), "switch.colour", "purple")
    assert str(path) in str(err) and "switch.colour" in str(err) and "purple" in str(err)


@pytest.mark.parametrize("mutate, key", [
    (lambda d: d.update(extra={"value": 1, "source": "x"}), "extra"),
    (lambda d: d["cable"]["price_usd"].pop("source"), "cable.price_usd.source"),
    (lambda d: d["cable"]["price_usd"].update(source=""), "cable.price_usd.source"),
    (lambda d: d["nic_transceiver"]["power_w"].update(value=-1), "nic_transceiver.power_w.value"),
    (lambda d: d["switch"]["radix"].update(value=63), "switch.radix.value"),
    (lambda d: d["count_host_links"].update(value="yes"), "count_host_links.value"),
    (lambda d: d.pop("cable"), "cable"),
])
def test_bad_files_are_config_errors(tmp_path: Path, mutate, key: str) -> None:
    doc = _default_doc()
    mutate(doc)
    with pytest.raises(ConfigError) as info:
        load_cost_params(_write(tmp_path, doc))
    assert info.value.key == key


def test_override_file_changes_the_prices(tmp_path: Path) -> None:
    doc = _default_doc()
    doc["switch"]["price_usd"]["value"] = 50000
    p = load_cost_params(_write(tmp_path, doc))
    assert p.costs.switch_price_usd == 50000


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_cost_params(tmp_path / "nope.yaml")
