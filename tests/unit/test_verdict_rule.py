"""The one verdict rule: a comparison is decided only when every configuration behind it has
enough successful runs, every monitor held and its interval supports a word. Each other
outcome is its own, never a finding, and every experiment's verdicts go through it."""

from __future__ import annotations

import json
import math

from controller.experiments.comparisons import Side, judge_ratio
from controller.experiments.fidelity import (
    DECIDED,
    OUT_OF_ROOM,
    TOO_FEW_RUNS,
    TOO_SPREAD,
    fidelity_lines,
    undecided_note,
    verdicts_json,
)
from controller.experiments.stats import interval_word, ratio_spread, spread_of

QUIET = {"machine_cpu": 0.3, "switch_cpu": 0.2, "busiest_switch": "rail0"}


def _side(label: str, times: list[float], *, ok: list[bool] | None = None, cpu: float = 0.3) -> Side:
    oks = ok if ok is not None else [True] * len(times)
    return Side(label, [{"iter": i, "ok": o, "seconds": t if o else math.nan, **QUIET, "machine_cpu": cpu}
                        for i, (t, o) in enumerate(zip(times, oks, strict=True))])


def test_a_tight_interval_on_quiet_runs_is_decided_and_says_its_word() -> None:
    v, spread = judge_ratio("alltoall", "rail-only is", _side("a", [0.70, 0.72, 0.71, 0.70]), _side("b", [1.0] * 4))
    assert v.outcome == DECIDED and v.decided and v.text() == "rail-only is faster"
    assert spread["n"] == 4 and 0.70 < spread["mean"] < 0.72


def test_every_run_of_one_side_failed_is_too_few_runs_not_a_finding_even_on_a_quiet_machine() -> None:
    """The case the old rule called decided: every in-network run failed, machine at 30%."""
    failed = _side("in-network", [1.0] * 5, ok=[False] * 5)
    v, spread = judge_ratio("in-network / ring", "in-network is", failed, _side("ring", [1.0] * 5))
    assert v.outcome == TOO_FEW_RUNS and not v.decided and v.finding == ""
    assert spread["n"] == 0
    assert v.text() == "undecided: too few runs (in-network: 0 of 5 succeeded; 2 needed)"
    data = verdicts_json([v])
    assert data["all_decided"] is False and data["verdicts"][0]["outcome"] == TOO_FEW_RUNS
    assert data["verdicts"][0]["runs"][0] == {"configuration": "in-network", "ok": 0, "total": 5}


def test_one_successful_run_per_side_is_too_few_for_an_interval() -> None:
    v, _ = judge_ratio("x", "a is", _side("a", [0.5]), _side("b", [1.0]))
    assert v.outcome == TOO_FEW_RUNS and "a: 1 of 1 succeeded" in v.text()


def test_runs_that_succeed_on_different_repetitions_do_not_pair_and_are_too_few() -> None:
    a = _side("a", [0.5, 0.5, 0.5, 0.5], ok=[True, True, False, False])
    b = _side("b", [1.0, 1.0, 1.0, 1.0], ok=[False, False, True, True])
    v, spread = judge_ratio("x", "a is", a, b)
    assert spread["n"] == 0 and v.outcome == TOO_FEW_RUNS and "paired: 0 of 0" in v.text()


def test_a_wide_interval_is_too_spread_to_tell_and_not_decided() -> None:
    v, _ = judge_ratio("x", "a is", _side("a", [0.5, 1.4, 0.7, 1.3]), _side("b", [1.0] * 4))
    assert v.outcome == TOO_SPREAD and not v.decided and v.finding == ""
    assert v.text().startswith("undecided: spread too large to tell (0.975 [")


def test_a_busy_machine_is_out_of_room_and_a_failed_runs_cpu_is_not_judged() -> None:
    busy, _ = judge_ratio("x", "a is", _side("a", [0.7, 0.7, 0.7], cpu=0.9), _side("b", [1.0] * 3))
    assert busy.outcome == OUT_OF_ROOM and "machine CPU 90% > 60%, in 3 of 6 intervals" in busy.text()
    a = _side("a", [0.7, 0.7, 0.7, 0.7], ok=[True, True, True, False])
    rows = [dict(r) for r in a.rows]
    rows[3]["machine_cpu"] = 0.99  # the failed run's interval: its figures do not count
    quiet_but_one_failed, _ = judge_ratio("x", "a is", Side("a", rows), _side("b", [1.0] * 4))
    assert quiet_but_one_failed.decided and quiet_but_one_failed.intervals == 7


def test_every_reason_is_named_and_the_first_is_the_outcome() -> None:
    a = _side("a", [0.5, 1.5, 0.7], ok=[True, True, False], cpu=0.95)
    v, _ = judge_ratio("x", "a is", a, _side("b", [1.0] * 3))
    assert v.outcomes == (OUT_OF_ROOM, TOO_SPREAD) and v.outcome == OUT_OF_ROOM
    assert "the emulation, not the network" in v.text() and "spread too large to tell" in v.text()
    lines = fidelity_lines([v])
    assert lines[-1].startswith("fidelity: 1 of 1 comparisons undecided; lower the link rate")
    assert "run more repetitions" in lines[-1]
    assert undecided_note([v]) == "\nundecided (x): the emulation ran out of room"


def test_goodput_words_and_slight_differences() -> None:
    assert interval_word({"low": 1.3, "high": 1.4, "n": 3}, below="lower", above="higher") == "higher"
    assert interval_word({"low": 0.93, "high": 0.97, "n": 3}) == "slightly faster"
    assert interval_word({"low": 0.97, "high": 1.03, "n": 3}) == "even"
    assert interval_word({"low": 0.85, "high": 1.03, "n": 3}) is None


def test_ratios_are_paired_by_iteration_and_failed_runs_left_out() -> None:
    rows = [{"fabric": f, "op": "x", "iter": i, "ok": True, "seconds": t}
            for f in ("a", "b") for i, t in enumerate([1.0, 2.0, 1.0])]
    rows[1]["ok"] = False  # a's iteration 1 failed: its pair goes
    sp = ratio_spread(rows, ("a", "x"), ("b", "x"))
    assert sp["n"] == 2 and sp["mean"] == 1.0 and sp["sd"] == 0.0
    assert spread_of([math.inf, 2.0, math.nan])["n"] == 1


def test_the_rule_is_the_one_every_experiment_uses() -> None:
    """No experiment builds a verdict beside the rule: every judge() outside the core passes
    its configurations' runs (judge() has no default for them), and a run that judged
    nothing decided nothing."""
    import inspect

    from controller.experiments.fidelity import judge

    assert inspect.signature(judge).parameters["runs"].default is inspect.Parameter.empty
    assert json.dumps(verdicts_json([])) == '{"limits": {"machine_cpu": 0.6, "switch_cpu": 0.85, "link_carried": 0.9, ' \
                                            '"link_overshoot": 1.05}, "all_decided": false, "verdicts": []}'


def test_the_collectives_plot_shows_failures_and_events(tmp_path) -> None:
    from controller.experiments.results import collective_series, plot_collectives

    rows = [{"fabric": f, "op": "allreduce", "iter": i, "ok": not (f == "rail-only" and i == 2), "seconds": 1.0 + i}
            for f in ("rail-only", "fat-tree") for i in range(3)]
    series = collective_series(rows)["allreduce"]
    assert series["rail-only"]["failed"] == [2] and series["fat-tree"]["failed"] == []
    out = plot_collectives(rows, tmp_path / "c.png", title="t", events={"rail-only": (2, "rail1 killed")})
    assert out.stat().st_size > 10_000
