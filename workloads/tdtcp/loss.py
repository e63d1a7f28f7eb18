"""Deterministic loss injection at the sender, for tests and experiments (pure).

A transmission is identified by its segment index (``seq // mss``) and its attempt (0 for
the first transmission, 1 for the first retransmission, ...). ``segments`` drops the first
transmission of the listed segments; ``rate`` drops each transmission with that probability,
decided by a hash of ``(seed, segment, attempt)``: the same segments are lost on every run,
whatever the timing.

>>> plan = LossPlan(segments=frozenset({3}))
>>> [plan.drops(k, 0) for k in range(5)], plan.drops(3, 1)
([False, False, False, True, False], False)
>>> p = LossPlan(rate=0.5, seed=7)
>>> [p.drops(k, 0) for k in range(8)] == [p.drops(k, 0) for k in range(8)]
True
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field

from workloads.tdtcp.errors import ConfigError

__all__ = ["LossPlan"]

_KEY = struct.Struct("!QQI")


@dataclass(frozen=True, kw_only=True)
class LossPlan:
    """Which transmissions the sender drops instead of sending."""

    segments: frozenset[int] = field(default_factory=frozenset)
    rate: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate < 1.0:
            raise ConfigError("LossPlan", "rate", self.rate, "must be in [0, 1)")
        if any(k < 0 for k in self.segments):
            raise ConfigError("LossPlan", "segments", sorted(self.segments), "segment indices must be >= 0")
        if not 0 <= self.seed < 2**64:
            raise ConfigError("LossPlan", "seed", self.seed, "must be in 0..2**64-1")

    @property
    def active(self) -> bool:
        """Whether anything is ever dropped."""
        return bool(self.segments) or self.rate > 0

    def drops(self, segment: int, attempt: int) -> bool:
        """Whether transmission ``attempt`` of segment ``segment`` is dropped."""
        if attempt == 0 and segment in self.segments:
            return True
        if self.rate <= 0:
            return False
        digest = hashlib.blake2b(_KEY.pack(self.seed, segment, attempt), digest_size=8).digest()
        return int.from_bytes(digest, "big") < self.rate * 2**64
