"""The Checkmate experiment's claims (controller/experiments/checkmate.py): the frequency
claim is judged against the budget by each side's 95% CI and against the paper's range, a
comparison whose emulation did not hold is undecided whatever its figures, and the loss run
agrees only if the shadow was never wrong."""

from __future__ import annotations

from typing import Any

import pytest

from controller.experiments.checkmate import CheckmateConfig, claims, configurations


def _over(name: str, mean: float, lo: float, hi: float, k: int = 0) -> dict[str, Any]:
    return {"config": name, "ratio": mean, "ratio_ci95": (mean, lo, hi), "repetitions": 5,
            "checkpoints_per_100": 100 / k if k else 100}


def _summary(checkfreq_k: int, checkfreq_ci: tuple[float, float, float], mirror: float = 1.0) -> dict[str, Any]:
    return {"budget": 0.05,
            "overhead": [_over("checkmate", mirror, mirror - 0.01, mirror + 0.01), _over(f"checkfreq k={checkfreq_k}", *checkfreq_ci),
                         _over("checkfreq k=1", 4.0, 3.9, 4.1, 1)],
            "tuning": {"checkfreq": {"system": "checkfreq", "first_k": checkfreq_k, "k": checkfreq_k,
                                     "within_budget": True, "rounds": []}},
            "repeated_work": {"checkmate": 0.0, "checkfreq": 5.0}}


def _verdict(rows: list[dict[str, str]], claim: str) -> str:
    return next(r["verdict"] for r in rows if r["claim"].startswith(claim))


@pytest.mark.parametrize(("k", "ci", "verdict"), [
    (8, (1.02, 1.00, 1.04), "agrees"),
    (2, (1.02, 1.00, 1.04), "below the paper's range"),
    (40, (1.02, 1.00, 1.04), "above the paper's range"),
    (8, (1.04, 0.99, 1.09), "agrees"),  # the mean decides, as the tuners decide
    (8, (1.06, 1.02, 1.10), "undecided: CheckFreq's tuner stopped at k=8 still above the budget"),
])
def test_the_frequency_claim_is_judged_by_the_budget_and_the_papers_range(k: int, ci, verdict: str) -> None:
    assert _verdict(claims(_summary(k, ci)), "5-34.5x").startswith(verdict)


def test_checkmate_over_budget_disagrees_and_an_emulation_that_did_not_hold_is_undecided() -> None:
    summary = _summary(8, (1.02, 1.00, 1.04), mirror=1.06)
    assert _verdict(claims(summary), "5-34.5x").startswith("disagrees: Checkmate's own overhead")
    held = claims(_summary(8, (1.02, 1.00, 1.04)), {"checkmate": True, "checkfreq k=8": False})
    assert _verdict(held, "5-34.5x") == "undecided: the emulation did not hold for checkfreq k=8"
    assert _verdict(held, "1.3-6.5x") == "agrees"  # 4.0x, both sides held
    assert "4.00x vs CheckFreq" in next(r["measured"] for r in held if r["claim"].startswith("1.3-6.5x"))


def test_repeated_work_and_the_loss_run() -> None:
    summary = _summary(8, (1.02, 1.00, 1.04))
    summary["loss_replication"] = {"iterations": 30, "matched": 26, "resynced": 2, "holes": 2, "wrong": 0}
    rows = claims(summary)
    assert _verdict(rows, "80-97.1%").startswith("above the paper's range: Checkmate repeated nothing")  # 0 of 5
    assert _verdict(rows, "with mirror loss") == "agrees"
    summary["loss_replication"]["wrong"] = 1
    assert _verdict(claims(summary), "with mirror loss").startswith("disagrees")


def test_each_baseline_runs_at_equal_frequency_and_at_its_tuned_interval_once() -> None:
    names = [c.name for c in configurations(CheckmateConfig(checkpoint_ks=(1, 8)), {"checkfreq": 8, "gemini": 3})]
    assert names == ["no checkpoint", "checkmate", "sync k=1", "sync k=8", "checkfreq k=1", "checkfreq k=8",
                     "gemini k=1", "gemini k=3", "gemini k=8"]
