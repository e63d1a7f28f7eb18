"""How often each checkpointing system can checkpoint within an overhead budget: its tuner's
first guess from profiled costs, the rounds that correct it against measurement, and the
repeated work a failure costs at the frequency it settles on. Pure: measuring a round is a
callable the experiment supplies.

- **CheckFreq** (Mohan et al., FAST'21; ``src/cf_iterator.py`` of msr-fiddle/CheckFreq,
  ``_complete_profile`` and the monitor after it): profile the iteration time ``t_i``, the
  snapshot's stall ``t_s`` and a full checkpoint ``t_f``; start at
  ``k = max(ceil((t_f - t_s) / t_i), 1)`` so that a persist ends before the next snapshot;
  then, while the measured overhead exceeds the budget, ``k += 2``.
- **Gemini** (Wang et al., SOSP'23, section 5): a checkpoint goes to a peer's memory in the
  idle spans of the training traffic; with ``b`` bytes of state over a NIC of rate ``r`` and
  an idle span of ``t_idle`` per iteration, a checkpoint needs ``ceil(b / (r t_idle))``
  iterations, the first guess; then ``k += 1`` while over the budget.
- **Synchronous** checkpoints stall for ``t_f`` each, so the budget allows one every
  ``ceil(t_f / (budget t_i))`` iterations.
- **Checkmate** checkpoints every iteration if its measured overhead is within the budget.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHECKFREQ_STEP",
    "GEMINI_STEP",
    "Round",
    "Tuning",
    "checkfreq_first_k",
    "gemini_first_k",
    "repeated_work",
    "storage_mbps_for",
    "sync_k",
    "tune",
]

#: CheckFreq's monitor raises k by 2 while over budget (cf_iterator.py)
CHECKFREQ_STEP = 2
#: Gemini's k grows an iteration at a time (a checkpoint spans whole iterations' idle spans)
GEMINI_STEP = 1


def checkfreq_first_k(iteration_s: float, full_s: float, snapshot_s: float) -> int:
    """CheckFreq's profiled frequency: a persist ends before the next snapshot.

    >>> checkfreq_first_k(0.05, 0.40, 0.002), checkfreq_first_k(0.05, 0.01, 0.002)
    (8, 1)
    """
    return max(math.ceil((full_s - snapshot_s) / iteration_s), 1)


def gemini_first_k(state_bytes: int, idle_s: float, rate_mbps: float) -> int:
    """Gemini's: the iterations whose idle spans carry one checkpoint to the peer.

    >>> gemini_first_k(250_000, 0.02, 100.0)  # 20 ms at 100 Mb/s carry 250 kB
    1
    >>> gemini_first_k(250_001, 0.02, 100.0)
    2
    """
    per_iteration = rate_mbps * 1e6 / 8 * idle_s
    return max(math.ceil(state_bytes / per_iteration - 1e-9), 1)


def sync_k(full_s: float, iteration_s: float, budget: float) -> int:
    """The most frequent synchronous checkpoint within ``budget``.

    >>> sync_k(0.4, 0.05, 0.05)
    160
    """
    return max(math.ceil(full_s / (budget * iteration_s) - 1e-9), 1)


@dataclass(frozen=True)
class Round:
    """One measured try of a checkpoint interval."""

    k: int
    overhead: float

    def within(self, budget: float) -> bool:
        return self.overhead <= budget


@dataclass(frozen=True)
class Tuning:
    """A system's tuning: its first guess, every round measured, and the interval kept."""

    system: str
    first_k: int
    rounds: tuple[Round, ...]
    k: int
    within_budget: bool

    def to_json(self) -> dict[str, Any]:
        return {"system": self.system, "first_k": self.first_k, "k": self.k, "within_budget": self.within_budget,
                "rounds": [{"k": r.k, "overhead": r.overhead} for r in self.rounds]}


def tune(system: str, first_k: int, step: int, measure: Callable[[int], float], budget: float,
         max_rounds: int = 5) -> Tuning:
    """Measure ``first_k``; while over ``budget``, step k and measure again (``max_rounds`` at most).

    >>> costs = {4: 0.09, 6: 0.06, 8: 0.04}
    >>> t = tune("checkfreq", 4, 2, costs.__getitem__, 0.05)
    >>> t.k, t.within_budget, [r.k for r in t.rounds]
    (8, True, [4, 6, 8])
    >>> tune("x", 1, 1, lambda k: 0.5, 0.05, max_rounds=2).within_budget
    False
    """
    rounds: list[Round] = []
    k = first_k
    for _ in range(max_rounds):
        rounds.append(Round(k, measure(k)))
        if rounds[-1].within(budget):
            break
        k += step
    return Tuning(system, first_k, tuple(rounds), rounds[-1].k, rounds[-1].within(budget))


def repeated_work(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """Iterations of work a failure repeats, on average over when it strikes: after iteration
    ``i`` completed, a restart resumes from the last checkpoint that reached storage
    (``persisted``), so ``i - persisted`` iterations are done again. Counted once a first
    checkpoint has landed (before it, every system restarts from the beginning alike).

    >>> rows = [{"iteration": i, "persisted": p} for i, p in enumerate([-1, -1, 1, 1, 3, 3])]
    >>> repeated_work(rows)  # after iterations 2..5: 1, 2, 1, 2
    1.5
    """
    lags = [int(r["iteration"]) - int(r["persisted"]) for r in rows
            if r.get("persisted") not in (None, "") and int(r["persisted"]) >= 0]
    return statistics.fmean(lags) if lags else None


def storage_mbps_for(state_bytes: int, iteration_s: float, checkpoint_iterations: float) -> float:
    """The storage link on which persisting ``state_bytes`` takes ``checkpoint_iterations``
    iterations of ``iteration_s``: the regime of the paper's jobs, whose multi-GB states take
    several iterations to persist.

    >>> round(storage_mbps_for(250_000, 0.05, 8.0), 2)
    5.0
    """
    return state_bytes * 8 / (checkpoint_iterations * iteration_s) / 1e6
