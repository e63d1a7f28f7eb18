"""The options of the TDTCP sender and receiver: frozen, keyword-only, checked on creation.

A bad value raises :class:`~controller.errors.ConfigError` naming the option and the value.
Sizes are in bytes and times in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workloads.tdtcp.congestion import MODES, CongestionConfig, Mode
from workloads.tdtcp.errors import ConfigError
from workloads.tdtcp.loss import LossPlan

__all__ = ["PORT", "ReceiverConfig", "SenderConfig"]

#: the receiver's UDP port unless told otherwise
PORT = 9300


def _positive(owner: str, key: str, value: float, *, allow_zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(owner, key, value, "must be a number")
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(owner, key, value, "must be >= 0" if allow_zero else "must be > 0")


def _port(owner: str, value: int, *, allow_zero: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not (0 if allow_zero else 1) <= value <= 65535:
        raise ConfigError(owner, "port", value, "must be a UDP port 1..65535")


@dataclass(frozen=True, kw_only=True)
class SenderConfig:
    """How a sender transmits.

    ``mode`` ``"tdtcp"`` keeps a congestion state per TDN, ``"single"`` one shared state.
    ``conn`` identifies the connection (random when ``None``). ``stats_interval`` is the
    period of the cwnd/goodput timeline. ``timeout`` ends a transfer that made no progress
    for that long with :class:`~workloads.errors.PeerTimeout`. ``use_timestamps`` takes RTT
    samples from echoed send times (unambiguous even for retransmissions); without, Karn's
    rule applies. ``min_reo_wnd`` is the least reordering window, in seconds, before a
    retransmission overtaken by later data is declared lost again. ``max_seconds`` ends the
    transfer after that long whether or not every byte was acknowledged.
    """

    mode: Mode = "tdtcp"
    port: int = PORT
    congestion: CongestionConfig = field(default_factory=CongestionConfig)
    conn: int | None = None
    initial_tdn: int = 0
    stats_interval: float = 0.01
    loss: LossPlan = field(default_factory=LossPlan)
    sock_buf: int = 4 << 20
    timeout: float = 30.0
    use_timestamps: bool = True
    dupthresh: int = 3
    min_reo_wnd: float = 0.001
    #: stop after this many seconds, done or not (a transfer of fixed length, as iperf3 -t)
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.max_seconds is not None:
            _positive("SenderConfig", "max_seconds", self.max_seconds)
        if self.mode not in MODES:
            raise ConfigError("SenderConfig", "mode", self.mode, f"must be one of {', '.join(MODES)}")
        _port("SenderConfig", self.port, allow_zero=False)
        if self.conn is not None and not 0 <= self.conn < 2**32:
            raise ConfigError("SenderConfig", "conn", self.conn, "must be in 0..2**32-1")
        if not 0 <= self.initial_tdn <= 0xFF:
            raise ConfigError("SenderConfig", "initial_tdn", self.initial_tdn, "must be a TDN id 0..255")
        if self.congestion.mss > 0xFFFF - 28 - 28:
            raise ConfigError("SenderConfig", "congestion.mss", self.congestion.mss, "must fit a UDP datagram")
        for key in ("stats_interval", "timeout"):
            _positive("SenderConfig", key, getattr(self, key))
        _positive("SenderConfig", "sock_buf", self.sock_buf, allow_zero=True)
        _positive("SenderConfig", "min_reo_wnd", self.min_reo_wnd, allow_zero=True)
        if isinstance(self.dupthresh, bool) or not isinstance(self.dupthresh, int) or self.dupthresh < 1:
            raise ConfigError("SenderConfig", "dupthresh", self.dupthresh, "must be an integer >= 1")


@dataclass(frozen=True, kw_only=True)
class ReceiverConfig:
    """How a receiver listens and acknowledges.

    ``window`` is the most the receiver advertises (the sender keeps at most that many bytes
    above the cumulative ACK); it is also held to a quarter of the socket's receive buffer.
    ``ack_every`` is 1 (an ACK per segment) or 2 (per second in-order segment, at most
    ``delayed_ack`` late; anything out of order is acknowledged at once). The receiver stops
    ``idle`` seconds after the last datagram, or after ``wait`` seconds without any.
    """

    port: int = PORT
    window: int = 16 << 20
    ack_every: int = 1
    delayed_ack: float = 0.002
    idle: float = 1.0
    wait: float = 30.0
    stats_interval: float = 0.01
    sock_buf: int = 4 << 20

    def __post_init__(self) -> None:
        _port("ReceiverConfig", self.port, allow_zero=True)
        if self.ack_every not in (1, 2):
            raise ConfigError("ReceiverConfig", "ack_every", self.ack_every, "must be 1 or 2")
        if isinstance(self.window, bool) or not isinstance(self.window, int) or not 0 < self.window < 2**32:
            raise ConfigError("ReceiverConfig", "window", self.window, "must be an integer in 1..2**32-1")
        for key in ("delayed_ack", "idle", "wait", "stats_interval"):
            _positive("ReceiverConfig", key, getattr(self, key))
        _positive("ReceiverConfig", "sock_buf", self.sock_buf, allow_zero=True)
