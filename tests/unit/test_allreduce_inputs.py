"""The collectives' all-reduce inputs sum exactly in float32 at 1,024 ranks, in any order."""

from __future__ import annotations

import random

import numpy as np
import pytest

from workloads.errors import VerificationError
from workloads.ops import allreduce_input, check_allreduce

pytestmark = pytest.mark.unit


def _tree_sum(parts: list[np.ndarray]) -> np.ndarray:
    while len(parts) > 1:
        parts = [parts[i] + parts[i + 1] if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def test_a_1024_rank_sum_is_exact_in_any_order_and_a_missing_rank_is_caught() -> None:
    n, ranks = 251 * 4, list(range(1024))
    inputs = {r: allreduce_input(r, n) for r in ranks}
    shuffled = random.Random(3).sample(ranks, len(ranks))
    for order in (ranks, ranks[::-1], shuffled):
        acc = np.zeros(n, np.float32)
        for r in order:
            acc += inputs[r]
        check_allreduce(acc, tuple(ranks), "sequential")
    check_allreduce(_tree_sum([inputs[r] for r in shuffled]), tuple(ranks), "tree")
    with pytest.raises(VerificationError, match="wrong result"):
        check_allreduce(acc - inputs[700], tuple(ranks), "rank 700 missing")
