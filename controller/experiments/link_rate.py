"""How the emulated links carried their configured rates over an interval: pure, queue
samples in, one :class:`LinkUse` out (:mod:`mininet.link_monitor` takes the samples).

Every shaped link direction leaves through an htb qdisc on its sending interface. Sampled a
few times a second, that qdisc's byte counter and the bytes it holds say two things:

- **busy stretches carried the rate**: while every sample finds at least a sampling
  period's worth of bytes queued (``rate x period``), the link was busy throughout, so a
  working link sends its rate over that stretch; if the machine cannot run the shaper on
  time, it sends less. This is Mininet-HiFi's link invariant (Handigol et al., CoNEXT 2012),
  measured from counters rather than traced per packet. Judging only such stretches keeps
  on-off traffic (a calendar queue releasing a day's packets at once, a TDN's circuit) from
  reading as a slow link. Only stretches of ``MIN_RUN_PERIODS`` periods or more count: htb
  sends in bursts (15 kB or two frames), which over one 50 ms period at 10 Mbit/s is +-24%
  and, since a stretch begins when the queue is full, biased; over longer stretches it
  averages out;
- **overshoot**: over the whole interval, no link may send more than its rate. A link that
  does is not the configured network (a burst allowance too large, a path left unshaped).

Counters are the bytes htb itself accounts (frames with their Ethernet header), so a link
that keeps its queue full reads very close to 1.0 of its rate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["MIN_BACKLOGGED_S", "MIN_RUN_PERIODS", "LinkUse", "QueueSample", "busy", "link_use", "merge_link_uses"]

#: a link busy for less than this is not judged (too few periods)
MIN_BACKLOGGED_S = 0.2
#: the sampling periods a busy stretch must last to count (see :func:`busy`)
MIN_RUN_PERIODS = 4


@dataclass(frozen=True, slots=True)
class QueueSample:
    """One sending interface's qdisc at one instant: bytes sent so far, packets and bytes queued."""

    t: float  # monotonic seconds
    sent_bytes: int
    qlen: int
    backlog_bytes: int = 0


def busy(samples: Sequence[QueueSample], rate_bps: float, min_periods: int = 4) -> tuple[float, int, int]:
    """Over the stretches of at least ``min_periods`` sampling periods that each began with at
    least a period's worth of bytes queued: their seconds, the bytes the link sent in them, and
    how many stretches there were.

    >>> full = [QueueSample(0.05 * i, 62_500 * i, 9, 200_000) for i in range(5)]  # 10 Mbit/s, 4 periods
    >>> busy(full + [QueueSample(0.25, 300_000, 0, 0), QueueSample(0.3, 300_000, 3, 90_000)], 1e7)
    (0.25, 300000, 1)
    >>> busy(full[:4], 1e7)  # three periods: too short to judge
    (0.0, 0, 0)
    """
    seconds, sent, stretches = 0.0, 0, 0
    start = 0
    for j, a in enumerate(samples):
        nxt = samples[j + 1] if j + 1 < len(samples) else None
        if nxt is not None and nxt.t > a.t and a.backlog_bytes >= rate_bps / 8 * (nxt.t - a.t):
            continue  # period j began full: the stretch goes on
        if j - start >= min_periods:  # the stretch of samples start..j: periods start..j-1
            seconds += a.t - samples[start].t
            sent += a.sent_bytes - samples[start].sent_bytes
            stretches += 1
        start = j + 1
    return round(seconds, 9), sent, stretches


@dataclass(frozen=True, slots=True)
class LinkUse:
    """Over an interval, across the monitored link directions (named ``node-interface``):

    - ``slowest``, ``carried``: the link that sent the smallest share of its rate in its busy
      periods (:func:`busy`), among those busy for at least ``MIN_BACKLOGGED_S``, and that
      share (None: none was);
    - ``fastest``, ``overshoot``: the link that sent the largest share of its rate over the
      whole interval, and that share;
    - ``backlogged``: how many links were busy long enough to be judged;
    - ``sched_delay_ms``: the worst lateness of the sampler's own wake-ups (a saturated
      machine schedules late), report only.
    """

    slowest: str | None
    carried: float | None
    fastest: str | None
    overshoot: float | None
    backlogged: int
    links: int
    sched_delay_ms: float | None = None

    def text(self) -> str:
        """e.g. ``links: 12 of 32 backlogged, the slowest carried 99% of its rate (h0-eth0)``."""
        parts = [f"links: {self.backlogged} of {self.links} backlogged"]
        if self.carried is not None:
            parts.append(f"the slowest carried {self.carried:.0%} of its rate ({self.slowest})")
        if self.overshoot is not None:
            parts.append(f"the busiest sent {self.overshoot:.0%} of its rate ({self.fastest})")
        return ", ".join(parts)


def link_use(series: Mapping[str, Sequence[QueueSample]], rates_bps: Mapping[str, float], *,
             min_backlogged_s: float = MIN_BACKLOGGED_S, sched_delay_ms: float | None = None,
             bursts: Mapping[str, int] | None = None) -> LinkUse:
    """The :class:`LinkUse` of an interval from each link's samples and configured rate in
    bits per second; links without a rate are left out.

    ``bursts`` (bytes, per link) is what htb may send at once (its burst, and the frame that
    overdraws it): a stretch begins when the queue is full, which may be just after the link
    spent that, so a working link owes up to one such burst at the start of each stretch. The
    carried share is the bytes sent over the rate's bytes less that debt (at most 1.0): a
    link of 5 Mbit/s with jumbo frames (18 kB of burst and a 9 kB frame) judged over a 200 ms
    stretch would otherwise read as low as 78%.

    >>> full = [QueueSample(0.1 * i, 1250 * i * 100, 5, 200_000) for i in range(11)]  # 10 Mbit/s, queue full
    >>> slow = [QueueSample(0.1 * i, 1000 * i * 100, 5, 200_000) for i in range(11)]  # 8 of 10 Mbit/s
    >>> idle = [QueueSample(0.1 * i, 0, 0) for i in range(11)]
    >>> u = link_use({"h0-eth0": full, "h1-eth0": slow, "h2-eth0": idle}, {"h0-eth0": 1e7, "h1-eth0": 1e7, "h2-eth0": 1e7})
    >>> u.slowest, round(u.carried, 3), u.fastest, round(u.overshoot, 3), u.backlogged, u.links
    ('h1-eth0', 0.8, 'h0-eth0', 1.0, 2, 3)
    >>> link_use({"h2-eth0": idle}, {"h2-eth0": 1e7}).carried is None
    True
    >>> round(link_use({"h1-eth0": slow}, {"h1-eth0": 1e7}, bursts={"h1-eth0": 100_000}).carried, 3)  # 1 MB of 1.25 less 0.1
    0.87
    """
    slowest: tuple[float, str] | None = None
    fastest: tuple[float, str] | None = None
    judged = links = 0
    for name, samples in series.items():
        rate = rates_bps.get(name)
        if not rate or len(samples) < 2:
            continue
        links += 1
        span = samples[-1].t - samples[0].t
        if span > 0:
            share = 8 * (samples[-1].sent_bytes - samples[0].sent_bytes) / span / rate
            if fastest is None or share > fastest[0]:
                fastest = (share, name)
        seconds, sent, stretches = busy(samples, rate, MIN_RUN_PERIODS)
        if seconds >= min_backlogged_s:
            judged += 1
            owed = stretches * (bursts or {}).get(name, 0)
            share = min(1.0, sent / max(rate / 8 * seconds - owed, 1.0))
            if slowest is None or share < slowest[0]:
                slowest = (share, name)
    return LinkUse(slowest[1] if slowest else None, round(slowest[0], 4) if slowest else None,
                   fastest[1] if fastest else None, round(fastest[0], 4) if fastest else None,
                   judged, links, sched_delay_ms)


def merge_link_uses(uses: Sequence[LinkUse | None]) -> LinkUse | None:
    """The links of several machines (a fabric across machines) judged together: the slowest
    of all, the busiest of all, the counts summed.

    >>> a = LinkUse("h0-eth0", 0.97, "h0-eth0", 0.99, 2, 8, 1.0)
    >>> b = LinkUse("h9-eth0", 0.91, "h9-eth0", 0.95, 1, 8, 3.0)
    >>> merge_link_uses([a, None, b])
    LinkUse(slowest='h9-eth0', carried=0.91, fastest='h0-eth0', overshoot=0.99, backlogged=3, links=16, sched_delay_ms=3.0)
    """
    real = [u for u in uses if u is not None]
    if not real:
        return None
    carried = [u for u in real if u.carried is not None]
    over = [u for u in real if u.overshoot is not None]
    slow = min(carried, key=lambda u: u.carried or 0.0) if carried else None
    fast = max(over, key=lambda u: u.overshoot or 0.0) if over else None
    delays = [u.sched_delay_ms for u in real if u.sched_delay_ms is not None]
    return LinkUse(slow.slowest if slow else None, slow.carried if slow else None,
                   fast.fastest if fast else None, fast.overshoot if fast else None,
                   sum(u.backlogged for u in real), sum(u.links for u in real), max(delays) if delays else None)
