"""Integer quantisation with a shared exponent (SwitchML's scheme, one exponent per tensor).

Every worker sends the exponent of its largest magnitude; the switch keeps the largest; each
worker then scales by ``2**(30 - E - ceil(log2 n))``, so that ``n`` quantised values add up
without overflowing int32. Scaling by a power of two is exact, so integer-valued floats of up
to 24 bits come back exactly; otherwise each element of the sum is within
:func:`error_bound` of the float sum.
"""

from __future__ import annotations

import math

import numpy as np

from workloads.aggregation.wire import EXPONENT_BIAS

__all__ = ["dequantize", "error_bound", "local_exponent", "quantize", "scale_for"]


def local_exponent(values: np.ndarray) -> int:
    """The biased exponent E + 127 with ``max|values| < 2**E`` (0 for an all-zero tensor).

    >>> local_exponent(np.array([0.5, -3.0]))  # 3 < 2**2
    129
    >>> local_exponent(np.zeros(4))
    0
    """
    peak = float(np.max(np.abs(values))) if values.size else 0.0
    if peak == 0.0 or not math.isfinite(peak):
        if not math.isfinite(peak):
            raise ValueError(f"cannot quantise a tensor holding {peak}")
        return 0
    _, exponent = math.frexp(peak)  # peak = m * 2**exponent, 0.5 <= m < 1
    return max(1, min(255, exponent + EXPONENT_BIAS))


def scale_for(biased_exponent: int, workers: int) -> float:
    """The power of two every worker multiplies by before rounding.

    >>> scale_for(129, 4)  # |x| < 4, 4 workers: 2**(30 - 2 - 2)
    67108864.0
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1 (got {workers})")
    exponent = biased_exponent - EXPONENT_BIAS if biased_exponent else -EXPONENT_BIAS
    return math.ldexp(1.0, 30 - exponent - math.ceil(math.log2(workers)))


def quantize(values: np.ndarray, scale: float) -> np.ndarray:
    return np.rint(values.astype(np.float64) * scale).astype(np.int32)


def dequantize(sums: np.ndarray, scale: float, dtype: np.dtype) -> np.ndarray:
    return (sums.astype(np.float64) / scale).astype(dtype)


def error_bound(scale: float, workers: int) -> float:
    """The largest difference between an element of the float sum and the dequantised one:
    each of ``workers`` roundings is off by at most half a step."""
    return workers * 0.5 / scale
