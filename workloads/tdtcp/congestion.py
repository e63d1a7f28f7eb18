"""Congestion control, one state per time-division network (TDN), pure and deterministic.

The algorithm is Reno AIMD in bytes (RFC 5681) with appropriate byte counting (RFC 3465,
L = 2 MSS), SACK-based loss recovery in the manner of RFC 6675 (the sender keeps the bytes
in flight below cwnd; cwnd = ssthresh during recovery) and NewReno's recovery point (one
reduction per window: recovery ends when the cumulative ACK passes the highest sequence
sent when it began, RFC 6582). A retransmission timeout collapses cwnd to one MSS (state
``loss``) and backs the RTO off (RFC 6298).

TDTCP (Chen et al., SIGCOMM 2022) keeps all of this per TDN. :class:`CongestionControl` is
the container: ``mode="tdtcp"`` holds a :class:`TdnState` per TDN id and makes the one of
the announced TDN active on :meth:`~CongestionControl.set_active`; ``mode="single"`` (the
baseline) holds one shared state whatever the TDN. Bytes count in flight against the state
of the TDN they were sent in, and what an ACK delivers, or a loss or a timeout takes out of
flight, is credited to that same state (:class:`Credits`): the per-TDN sequence ranges of
the kernel artifact, where an ACKed skb is credited to its ``data_tdn_id``.

>>> cc = CongestionControl("tdtcp", CongestionConfig(mss=1000))
>>> cc.on_send(0, 10_000, snd_una=0, snd_nxt=10_000)  # a full initial window in TDN 0
>>> cc.set_active(1)
True
>>> cc.on_send(1, 1000, snd_una=0, snd_nxt=11_000)
>>> cc.on_ack(Credits(delivered={0: 4000}, left_flight={0: 4000}), snd_una=4000, snd_nxt=11_000)
>>> cc.state(0).in_flight, cc.state(1).in_flight, cc.state(0).cwnd, cc.state(1).cwnd
(6000, 1000, 12000, 10000)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from workloads.tdtcp.errors import ConfigError
from workloads.tdtcp.rtt import RttEstimator

__all__ = ["INFINITE", "MODES", "CaState", "CongestionConfig", "CongestionControl", "Credits", "TdnState"]

INFINITE = 1 << 62
MODES = ("tdtcp", "single")
Mode = Literal["tdtcp", "single"]


class CaState(StrEnum):
    """The congestion-avoidance state of one TDN (Linux's TCP_CA_* in spirit)."""

    SLOW_START = "slow_start"
    CONGESTION_AVOIDANCE = "congestion_avoidance"
    FAST_RECOVERY = "fast_recovery"
    LOSS = "loss"


@dataclass(frozen=True, kw_only=True)
class CongestionConfig:
    """Per-TDN congestion-control parameters; sizes in bytes, times in seconds."""

    mss: int = 1444
    initial_window: int = 10  # segments (RFC 6928)
    max_cwnd: int = 64 << 20
    initial_rto: float = 1.0  # RFC 6298 2.1
    min_rto: float = 0.2  # Linux's TCP_RTO_MIN (RFC 6298 says 1 s)
    max_rto: float = 60.0

    def __post_init__(self) -> None:
        for key in ("mss", "initial_window", "max_cwnd"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError("CongestionConfig", key, value, "must be an integer >= 1")
        if self.max_cwnd < 2 * self.mss:
            raise ConfigError("CongestionConfig", "max_cwnd", self.max_cwnd, "must be >= 2 MSS")
        for key in ("initial_rto", "min_rto", "max_rto"):
            if not getattr(self, key) > 0:
                raise ConfigError("CongestionConfig", key, getattr(self, key), "must be > 0 seconds")
        if not self.min_rto <= self.max_rto:
            raise ConfigError("CongestionConfig", "min_rto", self.min_rto, f"must be <= max_rto {self.max_rto}")


@dataclass(frozen=True)
class Credits:
    """What one ACK (or a timeout) means for each TDN: bytes newly delivered (cumulatively
    ACKed or SACKed), bytes that left flight (delivered or declared lost), segments newly
    declared lost as ``(tdn, seq)``, and RTT samples as ``(tdn, seconds)``."""

    delivered: dict[int, int] = field(default_factory=dict)
    left_flight: dict[int, int] = field(default_factory=dict)
    lost: tuple[tuple[int, int], ...] = ()
    rtt_samples: tuple[tuple[int, float], ...] = ()


@dataclass(slots=True)
class TdnState:
    """cwnd, ssthresh, CA state, RTT/RTO estimate and bytes in flight of one TDN."""

    tdn: int | None  # None: the shared state of mode "single"
    config: CongestionConfig
    cwnd: int = 0
    ssthresh: int = INFINITE
    in_flight: int = 0
    recover: int = 0
    phase: CaState | None = None  # FAST_RECOVERY or LOSS while in them
    rtt: RttEstimator = field(init=False)
    bytes_sent: int = 0
    bytes_retransmitted: int = 0
    bytes_delivered: int = 0
    recoveries: int = 0
    timeouts: int = 0
    _ca_bytes: int = 0
    _peak: int = 0  # most bytes in flight over the last window (Linux's max_packets_out)
    _peak_seq: int = 0

    def __post_init__(self) -> None:
        c = self.config
        self.cwnd = self.cwnd or c.initial_window * c.mss
        self.rtt = RttEstimator(initial_rto=c.initial_rto, min_rto=c.min_rto, max_rto=c.max_rto)

    @property
    def state(self) -> CaState:
        """Fast recovery or loss while in them, else slow start below ssthresh."""
        if self.phase is not None:
            return self.phase
        return CaState.SLOW_START if self.cwnd < self.ssthresh else CaState.CONGESTION_AVOIDANCE

    def can_send(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more fit in cwnd (one segment always may, with nothing in flight)."""
        return self.in_flight == 0 or self.in_flight + nbytes <= self.cwnd

    def charge(self, nbytes: int, *, snd_una: int, snd_nxt: int, retransmission: bool = False) -> None:
        """``nbytes`` were (re)transmitted in this TDN; ``snd_una`` and ``snd_nxt`` after it."""
        self.in_flight += nbytes
        if snd_una >= self._peak_seq or self.in_flight > self._peak:  # Linux's tcp_cwnd_validate
            self._peak, self._peak_seq = self.in_flight, snd_nxt
        self.bytes_sent += nbytes
        if retransmission:
            self.bytes_retransmitted += nbytes

    def discharge(self, nbytes: int) -> None:
        """``nbytes`` sent in this TDN left flight (delivered or declared lost)."""
        self.in_flight = max(0, self.in_flight - nbytes)

    def _halve(self, flight: int) -> int:
        return max(flight // 2, 2 * self.config.mss)

    def on_loss(self, seq: int, *, snd_nxt: int, flight: int) -> bool:
        """A segment starting at ``seq`` sent in this TDN was declared lost with ``flight``
        bytes in flight: enter fast recovery unless this window was already reduced.
        Whether cwnd was reduced."""
        if self.phase is not None and seq < self.recover:
            return False
        self.ssthresh = self._halve(flight)
        self.cwnd = self.ssthresh
        self.phase, self.recover, self._ca_bytes = CaState.FAST_RECOVERY, snd_nxt, 0
        self.recoveries += 1
        return True

    def on_timeout(self, *, snd_nxt: int, flight: int) -> None:
        """The retransmission timer of a segment of this TDN expired: cwnd to one MSS,
        ssthresh halved (held on a repeated timeout, RFC 5681 3.1), RTO backed off."""
        if self.phase is not CaState.LOSS:
            self.ssthresh = self._halve(flight)
        self.cwnd = self.config.mss
        self.phase, self.recover, self._ca_bytes = CaState.LOSS, snd_nxt, 0
        self.timeouts += 1
        self.rtt.back_off()

    def end_recovery(self, snd_una: int) -> None:
        """The cumulative ACK reached ``snd_una``: fast recovery or loss ends once it passes
        the recovery point (cwnd deflates to ssthresh after fast recovery)."""
        if self.phase is not None and snd_una >= self.recover:
            if self.phase is CaState.FAST_RECOVERY:
                self.cwnd = self.ssthresh
            self.phase = None

    def on_ack(self, delivered: int) -> None:
        """An ACK delivered ``delivered`` bytes sent in this TDN. cwnd grows (not during fast
        recovery) only while it limits the sender: in slow start, while under twice the peak
        bytes in flight of the last window; in avoidance, while that peak fills it (Linux's
        ``tcp_is_cwnd_limited``)."""
        self.bytes_delivered += delivered
        if delivered > 0 and self.phase is not CaState.FAST_RECOVERY:
            self._grow(delivered)

    def _grow(self, delivered: int) -> None:
        mss = self.config.mss
        if self.cwnd < self.ssthresh:
            if self.cwnd >= 2 * self._peak:
                return
            grow = min(delivered, 2 * mss)
            step = min(grow, self.ssthresh - self.cwnd)
            self.cwnd += step
            delivered = grow - step
            if delivered <= 0:
                return
        elif self._peak + mss < self.cwnd:
            return
        self._ca_bytes += delivered
        if self._ca_bytes >= self.cwnd:
            self._ca_bytes -= self.cwnd
            self.cwnd += mss
        self.cwnd = min(self.cwnd, self.config.max_cwnd)

    def snapshot(self) -> dict[str, Any]:
        """The state as JSON-ready numbers (ssthresh ``None`` while infinite)."""
        srtt = self.rtt.srtt
        return {"cwnd": self.cwnd, "ssthresh": None if self.ssthresh >= INFINITE else self.ssthresh,
                "state": self.state.value, "in_flight": self.in_flight,
                "srtt_ms": None if srtt is None else srtt * 1e3, "rttvar_ms": self.rtt.rttvar * 1e3,
                "rto_ms": self.rtt.rto * 1e3}


class CongestionControl:
    """The congestion states of one connection keyed by TDN id, and the active TDN."""

    def __init__(self, mode: Mode, config: CongestionConfig, *, initial_tdn: int = 0) -> None:
        if mode not in MODES:
            raise ConfigError("CongestionControl", "mode", mode, f"must be one of {', '.join(MODES)}")
        if not 0 <= initial_tdn <= 0xFF:
            raise ConfigError("CongestionControl", "initial_tdn", initial_tdn, "must be a TDN id 0..255")
        self.mode: Mode = mode
        self.config = config
        self.active_tdn = initial_tdn
        self.switches = 0
        self._una = 0
        self._states: dict[int | None, TdnState] = {}
        self.state(initial_tdn)

    def state(self, tdn: int) -> TdnState:
        """The state that TDN ``tdn`` uses (created at the initial window on first use)."""
        key = tdn if self.mode == "tdtcp" else None
        st = self._states.get(key)
        if st is None:
            st = self._states[key] = TdnState(key, self.config)
        return st

    @property
    def active(self) -> TdnState:
        """The state of the active TDN: its cwnd limits what is sent now."""
        return self.state(self.active_tdn)

    def states(self) -> Iterator[tuple[str, TdnState]]:
        """``(key, state)`` in key order: the TDN id as text, or ``"shared"`` in mode single."""
        for key in sorted(self._states, key=lambda k: -1 if k is None else k):
            yield ("shared" if key is None else str(key)), self._states[key]

    def set_active(self, tdn: int) -> bool:
        """The network is now TDN ``tdn``; whether that changed the active TDN. In mode
        ``single`` the TDN id changes (segments are tagged with it) but the state is shared."""
        if not 0 <= tdn <= 0xFF:
            raise ValueError(f"TDN id {tdn} outside 0..255")
        if tdn == self.active_tdn:
            return False
        self.active_tdn = tdn
        self.state(tdn)
        self.switches += 1
        return True

    def on_send(self, tdn: int, nbytes: int, *, snd_una: int, snd_nxt: int, retransmission: bool = False) -> None:
        """``nbytes`` leave in TDN ``tdn`` (``snd_una``, ``snd_nxt`` after it): charge its state."""
        self.state(tdn).charge(nbytes, snd_una=snd_una, snd_nxt=snd_nxt, retransmission=retransmission)

    def on_ack(self, credits: Credits, *, snd_una: int, snd_nxt: int) -> None:
        """Apply one ACK's credits: flight relief, losses, RTT samples, the end of recoveries,
        then cwnd growth, each to the state of the TDN the bytes were sent in (summed per
        state in mode single). ``snd_una`` and ``snd_nxt`` are after the ACK."""
        state = self.state
        prior: dict[int, int] = {}
        for tdn, n in credits.left_flight.items():
            st = state(tdn)
            prior.setdefault(id(st), st.in_flight)
            st.discharge(n)
        for tdn, seq in credits.lost:
            st = state(tdn)
            st.on_loss(seq, snd_nxt=snd_nxt, flight=prior.get(id(st), st.in_flight))
        for tdn, rtt in credits.rtt_samples:
            state(tdn).rtt.sample(rtt)
        if snd_una > self._una:  # the cumulative ACK moved: any TDN's recovery may end
            self._una = snd_una
            for st in self._states.values():
                st.end_recovery(snd_una)
        if self.mode == "single" and len(credits.delivered) > 1:
            state(self.active_tdn).on_ack(sum(credits.delivered.values()))
            return
        for tdn, n in credits.delivered.items():
            state(tdn).on_ack(n)

    def on_timeout(self, tdn: int, left_flight: dict[int, int], *, snd_nxt: int) -> None:
        """The retransmission timer expired for a segment sent in ``tdn``: every outstanding
        segment was declared lost (``left_flight`` per TDN); ``tdn``'s state collapses."""
        st = self.state(tdn)
        flight = st.in_flight
        for t, n in left_flight.items():
            self.state(t).discharge(n)
        st.on_timeout(snd_nxt=snd_nxt, flight=flight)
