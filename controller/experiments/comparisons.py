"""One comparison, judged one way in every experiment: two configurations' figures, paired
by repetition, their ratio's interval, the word it supports and the verdict.

The rule (:class:`~controller.experiments.fidelity.Verdict`): decided only when each
configuration has at least :data:`~controller.experiments.stats.MIN_RUNS` successful runs,
every interval they were measured in held the fidelity limits, and the ratio's 95% interval
supports a word (:func:`~controller.experiments.stats.interval_word`). "Too few runs" and
"spread too large to tell" are outcomes of their own, never a finding.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.experiments.fidelity import FidelityLimits, Verdict, judge, runs_of
from controller.experiments.stats import (
    EVEN_WITHIN,
    MIN_RUNS,
    interval_text,
    interval_word,
    paired_ratios,
    spread_of,
)

__all__ = ["Side", "judge_ratio"]

Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Side:
    """One configuration of a comparison: its label (as the verdict names it) and its rows,
    failed ones included (``ok`` false)."""

    label: str
    rows: Sequence[Row]


def _ok(row: Row) -> bool:
    return bool(row.get("ok", True))


def _by_key(rows: Iterable[Row], key: Callable[[Row], Hashable], value: Callable[[Row], float]) -> dict[Hashable, float]:
    return {key(r): float(value(r)) for r in rows if _ok(r)}


def judge_ratio(comparison: str, subject: str, num: Side, den: Side, *,
                key: Callable[[Row], Hashable] = lambda r: r["iter"],
                value: Callable[[Row], float] = lambda r: r["seconds"],
                intervals: Iterable[Row] | None = None, below: str = "faster", above: str = "slower",
                even_within: float = EVEN_WITHIN, needed: int = MIN_RUNS,
                limits: FidelityLimits | None = None) -> tuple[Verdict, dict[str, float]]:
    """``num``'s figure over ``den``'s, paired by ``key`` (the repetition), judged: the
    verdict, whose finding is ``"{subject} {word}"``, and the ratio's spread.

    ``intervals`` are the measured intervals the figures rest on (by default every row of
    both sides; rows of failed runs are never judged); ``below``/``above`` name a ratio
    under or over 1 (a time: faster/slower; a goodput: lower/higher).

    >>> a = Side("rail-only", [{"iter": i, "ok": True, "seconds": s, "machine_cpu": 0.3}
    ...                        for i, s in enumerate([0.70, 0.72, 0.71])])
    >>> b = Side("fat-tree", [{"iter": i, "ok": True, "seconds": 1.0, "machine_cpu": 0.3} for i in range(3)])
    >>> v, spread = judge_ratio("alltoall", "rail-only is", a, b)
    >>> v.text(), spread["n"]
    ('rail-only is faster', 3)
    >>> broken = Side("fat-tree", [{"iter": i, "ok": i == 0, "seconds": 1.0} for i in range(3)])
    >>> judge_ratio("alltoall", "rail-only is", a, broken)[0].text()
    'undecided: too few runs (fat-tree: 1 of 3 succeeded; 2 needed)'
    >>> wide = Side("x", [{"iter": i, "ok": True, "seconds": s, "machine_cpu": 0.3} for i, s in enumerate([0.5, 1.5])])
    >>> judge_ratio("y", "x is", wide, b)[0].outcome
    'spread too large to tell'
    """
    spread = spread_of(paired_ratios(_by_key(num.rows, key, value), _by_key(den.rows, key, value)))
    word = interval_word(spread, below=below, above=above, even_within=even_within)
    finding = f"{subject} {word}" if word else ""
    too_spread = "" if word or spread["n"] < 2 else f"{interval_text(spread)}, beyond the words' bands"
    rows = list(intervals) if intervals is not None else [*num.rows, *den.rows]
    limits = limits or FidelityLimits()
    verdict = judge(comparison, finding, rows, limits, runs=(runs_of(num.label, num.rows), runs_of(den.label, den.rows)),
                    needed=needed, too_spread=too_spread)
    if spread["n"] < needed and not verdict.short:
        # every configuration ran, but too few repetitions pair up (they failed on different ones)
        verdict = judge(comparison, finding, rows, limits,
                        runs=(runs_of(f"{num.label} and {den.label} paired", [{"ok": True}] * int(spread["n"])),),
                        needed=needed, too_spread=too_spread)
    return verdict, spread
