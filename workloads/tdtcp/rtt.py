"""RTT estimation and the retransmission timeout of RFC 6298 (pure).

>>> est = RttEstimator(initial_rto=1.0, min_rto=0.2, max_rto=60.0)
>>> est.rto
1.0
>>> est.sample(0.1)
>>> round(est.srtt, 3), round(est.rttvar, 3), round(est.rto, 3)
(0.1, 0.05, 0.3)
>>> est.back_off(); round(est.rto, 3)
0.6
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ALPHA", "BETA", "K", "RttEstimator"]

ALPHA = 1 / 8
BETA = 1 / 4
K = 4


@dataclass(slots=True)
class RttEstimator:
    """SRTT, RTTVAR and RTO in seconds (RFC 6298 section 2), with exponential backoff.

    ``rto`` is the timeout to arm now: the base RTO doubled once per :meth:`back_off`, capped
    at ``max_rto``. A new sample resets the backoff (as Linux does: the sample proves the
    path delivers again). The clock granularity G is taken as 0: the clock is in
    nanoseconds.
    """

    initial_rto: float
    min_rto: float
    max_rto: float
    srtt: float | None = None
    rttvar: float = 0.0
    backoff: int = 0
    samples: int = 0
    _base: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self._base = self.initial_rto

    def sample(self, rtt: float) -> None:
        """Fold one RTT measurement (seconds, >= 0) into SRTT and RTTVAR (RFC 6298 2.2-2.3)."""
        rtt = max(rtt, 0.0)
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = (1 - BETA) * self.rttvar + BETA * abs(self.srtt - rtt)
            self.srtt = (1 - ALPHA) * self.srtt + ALPHA * rtt
        self._base = min(max(self.srtt + K * self.rttvar, self.min_rto), self.max_rto)
        self.backoff = 0
        self.samples += 1

    def back_off(self) -> None:
        """The timer expired: double the RTO (RFC 6298 5.5), up to ``max_rto``."""
        if self.rto < self.max_rto:
            self.backoff += 1

    @property
    def rto(self) -> float:
        """The retransmission timeout to arm, in seconds."""
        return min(self._base * (2 ** self.backoff), self.max_rto)
