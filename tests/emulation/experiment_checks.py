"""What every experiment's results must say about its fidelity (shared by the experiment tests)."""

from __future__ import annotations

from typing import Any


def assert_fidelity_reported(results: dict[str, Any], table: str) -> None:
    """The results hold the configuration as JSON and one machine-readable verdict per
    comparison, and the table says each one (decided or not: these tests must not depend on
    how busy the machine is)."""
    assert isinstance(results["config"], dict), "the configuration as JSON, not a repr"
    fidelity = results["fidelity"]
    assert set(fidelity["limits"]) == {"machine_cpu", "switch_cpu", "link_carried", "link_overshoot"}
    assert fidelity["verdicts"], "at least one comparison judged"
    for v in fidelity["verdicts"]:
        assert isinstance(v["decided"], bool) and v["intervals"] >= 0
        assert (v["finding"] is None) == (not v["decided"])
        assert f"fidelity, {v['comparison']}: {v['verdict']}" in table
    assert fidelity["all_decided"] == all(v["decided"] for v in fidelity["verdicts"])
