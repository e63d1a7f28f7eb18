"""Listen for the ToR's TDN change notifications on a raw ICMP socket, in a thread (I/O).

Each ICMP type 7 code 0 message calls ``on_tdn(tdn, received)`` with the TDN id and the
receipt time (``time.monotonic()``, the clock of every namespace of the machine), from the
listener's thread; :meth:`~workloads.tdtcp.sender.Sender.set_tdn` is such a callback. A
kernel filter (``ICMP_FILTER``) passes only type 7 to the socket. Opening it needs root or
``CAP_NET_RAW``.
"""

from __future__ import annotations

import collections
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from workloads.tdtcp.errors import ListenerError, WireFormatError
from workloads.tdtcp.icmp import ICMP_ACTIVE_TDN_ID, parse_notification

__all__ = ["TdnListener"]

log = logging.getLogger(__name__)

_SOL_RAW = 255
_ICMP_FILTER = 1


class TdnListener:
    """A thread receiving TDN notifications; use as a context manager.

    ``received`` lists ``(time, tdn, source address)`` of every notification passed on.
    Messages with a wrong checksum are dropped (counted) unless ``accept_bad_checksum``.
    """

    def __init__(self, on_tdn: Callable[[int, float], object], *, accept_bad_checksum: bool = False,
                 poll: float = 0.1) -> None:
        self.on_tdn, self.accept_bad_checksum, self.poll = on_tdn, accept_bad_checksum, poll
        self.received: list[tuple[float, int, str | None]] = []
        self.ignored = collections.Counter[str]()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> TdnListener:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Open the raw socket and start the thread; :class:`ListenerError` without privilege."""
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        except PermissionError as exc:
            raise ListenerError(f"cannot open a raw ICMP socket for TDN notifications: {exc} "
                                "(needs root or CAP_NET_RAW)") from exc
        try:
            sock.setsockopt(_SOL_RAW, _ICMP_FILTER, struct.pack("=I", ~(1 << ICMP_ACTIVE_TDN_ID) & 0xFFFFFFFF))
        except OSError as exc:  # a kernel without ICMP_FILTER: the parser filters instead
            log.debug("tdtcp listener: no ICMP_FILTER: %s", exc)
        sock.settimeout(self.poll)
        self._sock = sock
        self._thread = threading.Thread(target=self._run, name="tdn-listener", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and close the socket (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _run(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                data = self._sock.recv(2048)
            except TimeoutError:
                continue
            except OSError as exc:
                if not self._stop.is_set():
                    self.error = exc
                    log.error("tdtcp listener: raw socket failed: %s", exc)
                return
            now = time.monotonic()
            try:
                note = parse_notification(data)
            except WireFormatError as exc:
                self.ignored["malformed"] += 1
                log.debug("tdtcp listener: ignored: %s", exc)
                continue
            if note is None:
                self.ignored["other_icmp"] += 1
                continue
            if not note.checksum_ok and not self.accept_bad_checksum:
                self.ignored["bad_checksum"] += 1
                continue
            self.received.append((now, note.tdn, note.src))
            self.on_tdn(note.tdn, now)

    def stats(self) -> dict[str, Any]:
        """``{"received": [[t, tdn, src], ...], "ignored": {...}, "error": ...}``."""
        return {"received": [list(r) for r in self.received], "ignored": dict(self.ignored),
                "error": None if self.error is None else str(self.error)}
