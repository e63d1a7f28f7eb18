"""Headline ratios come with their spread, and what the spread supports is said plainly."""

from __future__ import annotations

import math

from controller.experiments.rail_only import ratio_spread, verdict


def _rows(fabric: str, op: str, times: list[float], ok: bool = True) -> list[dict]:
    return [{"fabric": fabric, "op": op, "iter": i, "ok": ok, "seconds": t} for i, t in enumerate(times)]


def test_ratios_are_paired_by_iteration_and_failed_runs_left_out() -> None:
    rows = _rows("rail-only", "allreduce", [1.0, 2.0, 1.0]) + _rows("fat-tree", "allreduce", [1.0, 2.0, 1.0])
    rows[1]["ok"] = False  # rail-only's iteration 1 failed: its pair goes
    sp = ratio_spread(rows, ("rail-only", "allreduce"), ("fat-tree", "allreduce"))
    assert sp["n"] == 2 and sp["mean"] == 1.0 and sp["sd"] == 0.0 and verdict(sp) == "even"


def test_a_wide_interval_supports_no_conclusion_and_one_run_none_at_all() -> None:
    rows = _rows("a", "x", [0.5, 1.2, 0.7, 1.3]) + _rows("b", "x", [1.0] * 4)
    assert verdict(ratio_spread(rows, ("a", "x"), ("b", "x"))) == "spread too large to tell"
    tight = _rows("a", "x", [0.70, 0.72, 0.71, 0.70, 0.69]) + _rows("b", "x", [1.0] * 5)
    assert verdict(ratio_spread(tight, ("a", "x"), ("b", "x"))) == "faster"
    one = ratio_spread(_rows("a", "x", [0.5]) + _rows("b", "x", [1.0]), ("a", "x"), ("b", "x"))
    assert one["n"] == 1 and math.isnan(one["low"]) and verdict(one) == "too few runs to tell"


def test_the_collectives_plot_shows_failures_and_events(tmp_path) -> None:
    from controller.experiments.results import collective_series, plot_collectives

    rows = [{"fabric": f, "op": "allreduce", "iter": i, "ok": not (f == "rail-only" and i == 2), "seconds": 1.0 + i}
            for f in ("rail-only", "fat-tree") for i in range(3)]
    series = collective_series(rows)["allreduce"]
    assert series["rail-only"]["failed"] == [2] and series["fat-tree"]["failed"] == []
    out = plot_collectives(rows, tmp_path / "c.png", title="t", events={"rail-only": (2, "rail1 killed")})
    assert out.stat().st_size > 10_000
