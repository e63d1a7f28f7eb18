"""The statistics every experiment's comparisons rest on: pure, numbers in, numbers out.

A comparison is a ratio of two configurations' figures (a completion time, a goodput),
paired by repetition so that what both runs shared (the machine's state, a warm cache)
cancels. Its 95% confidence interval (Student's t) says what the runs support:
:func:`interval_word` turns it into a word, or into nothing when it is too wide to call.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

__all__ = ["EVEN_WITHIN", "MIN_RUNS", "interval_text", "interval_word", "mean_ci95", "mean_sd", "paired_ratios",
           "ratio_spread", "spread_of", "t95"]

#: a ratio whose interval lies within 1 ± this is "even"
EVEN_WITHIN = 0.05
#: the fewest successful runs per configuration an interval needs (a spread needs two)
MIN_RUNS = 2

#: two-sided 95% quantiles of Student's t for 1..30 degrees of freedom
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)


def t95(dof: int) -> float:
    """The two-sided 95% quantile of Student's t with ``dof`` degrees of freedom (1.96
    beyond 30).

    >>> t95(1), t95(4), t95(100)
    (12.706, 2.776, 1.96)
    """
    if dof < 1:
        raise ValueError(f"Student's t needs at least one degree of freedom (got {dof})")
    return _T95[dof - 1] if dof <= len(_T95) else 1.96


def _finite(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def mean_sd(values: Iterable[float | None]) -> tuple[float, float, int]:
    """Mean, sample standard deviation (0 for one value) and count of the finite values.

    >>> mean_sd([1.0, 2.0, 3.0, float("nan"), None])
    (2.0, 1.0, 3)
    >>> mean_sd([])
    (nan, nan, 0)
    """
    xs = _finite(values)
    if not xs:
        return math.nan, math.nan, 0
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0), len(xs)


def mean_ci95(values: Iterable[float | None]) -> tuple[float, float, float] | None:
    """Mean and its 95% confidence interval over the finite values; None for fewer than 2.

    >>> mean_ci95([1.0, 1.0, 1.0])
    (1.0, 1.0, 1.0)
    >>> lo, hi = mean_ci95([0.9, 1.1])[1:]
    >>> round(lo, 3), round(hi, 3)
    (-0.271, 2.271)
    """
    xs = _finite(values)
    if len(xs) < 2:
        return None
    m = statistics.fmean(xs)
    half = t95(len(xs) - 1) * statistics.stdev(xs) / len(xs) ** 0.5
    return m, m - half, m + half


def spread_of(ratios: Iterable[float | None]) -> dict[str, float]:
    """Mean, sample sd, 95% interval and count of the finite ``ratios`` (NaN where the
    count cannot support a figure).

    >>> {k: round(v, 3) for k, v in spread_of([1.0, 1.1, 0.9]).items()}
    {'mean': 1.0, 'sd': 0.1, 'low': 0.752, 'high': 1.248, 'n': 3}
    >>> spread_of([2.0])["n"], math.isnan(spread_of([2.0])["low"])
    (1, True)
    """
    xs = _finite(ratios)
    if not xs:
        return {"mean": math.nan, "sd": math.nan, "low": math.nan, "high": math.nan, "n": 0}
    mean = statistics.fmean(xs)
    if len(xs) < 2:
        return {"mean": mean, "sd": math.nan, "low": math.nan, "high": math.nan, "n": 1}
    sd = statistics.stdev(xs)
    half = t95(len(xs) - 1) * sd / len(xs) ** 0.5
    return {"mean": mean, "sd": sd, "low": mean - half, "high": mean + half, "n": len(xs)}


def paired_ratios(num: Mapping[Hashable, float], den: Mapping[Hashable, float]) -> list[float]:
    """``num[k] / den[k]`` for every key both have (in key order), where both are finite
    and the denominator positive.

    >>> paired_ratios({0: 1.0, 1: 2.0, 2: 3.0}, {0: 2.0, 2: 0.0, 3: 1.0})
    [0.5]
    """
    out = []
    for k in sorted(set(num) & set(den), key=repr):
        a, b = num[k], den[k]
        if math.isfinite(a) and math.isfinite(b) and b > 0:
            out.append(a / b)
    return out


def ratio_spread(rows: Iterable[Mapping[str, Any]], num: tuple[str, str], den: tuple[str, str]) -> dict[str, float]:
    """The ratio of ``num``'s to ``den``'s completion time, ``(fabric, op)`` each, paired by
    iteration over the successful rows: :func:`spread_of` the ratios.

    >>> rows = [{"fabric": f, "op": "x", "iter": i, "ok": True, "seconds": s}
    ...         for f, times in (("a", [1.0, 1.1, 0.9]), ("b", [1.0, 1.0, 1.0])) for i, s in enumerate(times)]
    >>> {k: round(v, 3) for k, v in ratio_spread(rows, ("a", "x"), ("b", "x")).items()}
    {'mean': 1.0, 'sd': 0.1, 'low': 0.752, 'high': 1.248, 'n': 3}
    """
    rows = list(rows)

    def times(key: tuple[str, str]) -> dict[Hashable, float]:
        return {int(r["iter"]): float(r["seconds"]) for r in rows if (r["fabric"], r["op"]) == key and r["ok"]}

    return spread_of(paired_ratios(times(num), times(den)))


def interval_word(spread: Mapping[str, float], *, below: str = "faster", above: str = "slower",
                  even_within: float = EVEN_WITHIN) -> str | None:
    """What a ratio's 95% interval supports: ``below`` (all of it under ``1 - even_within``),
    ``above``, ``even`` (all of it within the band), ``slightly`` below or above (on one
    side of 1 and reaching into the band, but not past twice it); None when it supports no
    word: fewer than two ratios, or an interval wider than that.

    >>> interval_word({"low": 0.70, "high": 0.80, "n": 5}), interval_word({"low": 0.97, "high": 1.02, "n": 5})
    ('faster', 'even')
    >>> interval_word({"low": 0.936, "high": 0.965, "n": 8}), interval_word({"low": 1.02, "high": 1.09, "n": 8})
    ('slightly faster', 'slightly slower')
    >>> interval_word({"low": 1.3, "high": 1.5, "n": 3}, below="lower", above="higher")
    'higher'
    >>> interval_word({"low": 0.8, "high": 1.3, "n": 5}) is None, interval_word({"low": 0.8, "high": 0.9, "n": 1})
    (True, None)
    """
    low, high, n = spread.get("low", math.nan), spread.get("high", math.nan), spread.get("n", 0)
    if not n or n < 2 or not (math.isfinite(low) and math.isfinite(high)):
        return None
    if high < 1 - even_within:
        return below
    if low > 1 + even_within:
        return above
    if low >= 1 - even_within and high <= 1 + even_within:
        return "even"
    if high < 1 and low >= 1 - 2 * even_within:
        return f"slightly {below}"
    if low > 1 and high <= 1 + 2 * even_within:
        return f"slightly {above}"
    return None


def interval_text(spread: Mapping[str, float]) -> str:
    """``0.820 [0.798, 0.842] over 8`` (the mean, its 95% interval and the count).

    >>> interval_text({"mean": 0.82, "low": 0.798, "high": 0.842, "n": 8})
    '0.820 [0.798, 0.842] over 8'
    >>> interval_text({"mean": 0.82, "low": float("nan"), "high": float("nan"), "n": 1})
    '0.820 (one run: no interval)'
    """
    n = int(spread.get("n") or 0)
    if not n:
        return "no pair of runs"
    if n < 2 or not math.isfinite(spread.get("low", math.nan)):
        return f"{spread['mean']:.3f} (one run: no interval)"
    return f"{spread['mean']:.3f} [{spread['low']:.3f}, {spread['high']:.3f}] over {n}"
