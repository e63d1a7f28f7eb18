"""Standard input for Mininet's CLI that a stop signal ends, whichever thread it lands on.

A signal handler that raises works only when the kernel interrupts the main thread's
blocking read with the signal; when it delivers the signal to another thread (gRPC's, a
monitor's), the main thread sleeps on in ``read()`` and the Python handler never runs.
``signal.set_wakeup_fd`` is written by the C-level handler on any thread, so a reader that
waits on stdin and on that pipe together sees the stop in every case: its ``readline``
returns ``""``, end of input, and the CLI exits through its own EOF path.
"""

from __future__ import annotations

import os
import select
from typing import IO


class StoppableStdin:
    """Line reads from ``stream`` that return end of input once ``wake_fd`` is readable.
    Mininet's CLI reads it with ``readline`` (commands), ``read(1)`` (keys for a running
    command) and polls ``fileno()``."""

    def __init__(self, stream: IO[str], wake_fd: int, encoding: str = "utf-8") -> None:
        self._fd = stream.fileno()
        self._wake_fd = wake_fd
        self._encoding = encoding
        self._buffer = b""
        self._eof = False
        self.stopped = False

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def _fill(self) -> bool:
        """Wait for more input; False once input ended or a stop arrived."""
        if self._eof or self.stopped:
            return False
        while True:
            try:
                ready, _, _ = select.select([self._fd, self._wake_fd], [], [])
            except InterruptedError:  # pragma: no cover - PEP 475 retries select itself
                continue
            if self._wake_fd in ready:
                self.stopped = True
                return False
            chunk = os.read(self._fd, 4096)
            if not chunk:
                self._eof = True
                return False
            self._buffer += chunk
            return True

    def readline(self, size: int = -1) -> str:
        while b"\n" not in self._buffer and self._fill():
            pass
        if self.stopped:
            return ""
        line, sep, rest = self._buffer.partition(b"\n")
        self._buffer = rest
        return (line + sep).decode(self._encoding, errors="replace")

    def read(self, size: int = -1) -> str:
        if not self._buffer:
            self._fill()
        if self.stopped:
            return ""
        n = len(self._buffer) if size < 0 else size
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out.decode(self._encoding, errors="replace")
