"""Progress bars, one per task (switch), redrawn in place on a terminal.

Off a terminal (CI, pipes) each task prints one line when it finishes, so logs stay short.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

__all__ = ["MultiProgress"]


class MultiProgress:
    """Thread-safe progress of several named tasks.

    >>> import io
    >>> out = io.StringIO()
    >>> p = MultiProgress(["rail0"], stream=out)
    >>> p.set_total("rail0", 2); p.advance("rail0", 2); p.finish("rail0", "ok")
    >>> "rail0" in out.getvalue() and "2/2" in out.getvalue()
    True
    """

    def __init__(self, names: list[str], *, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.width = width
        self.names = list(names)
        self.label = max((len(n) for n in names), default=4)
        self.total = dict.fromkeys(names, 0)
        self.done = dict.fromkeys(names, 0)
        self.status = dict.fromkeys(names, "")
        self._lock = threading.Lock()
        self._drawn = False
        self._last = 0.0
        self._t0 = time.monotonic()

    def set_total(self, name: str, total: int) -> None:
        with self._lock:
            self.total[name] = total
            self._draw()

    def advance(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.done[name] += n
            self._draw()

    def finish(self, name: str, status: str) -> None:
        with self._lock:
            self.status[name] = status
            if self.tty:
                self._draw(force=True)
            else:
                self.stream.write(self._line(name) + "\n")
                self.stream.flush()

    def _line(self, name: str) -> str:
        total, done = self.total[name], self.done[name]
        frac = done / total if total else 1.0
        filled = int(frac * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        return f"  {name:<{self.label}} [{bar}] {done}/{total} {self.status[name]}"

    def _draw(self, force: bool = False) -> None:
        if not self.tty:
            return
        now = time.monotonic()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        if self._drawn:
            self.stream.write(f"\x1b[{len(self.names)}F")
        for name in self.names:
            self.stream.write("\x1b[2K" + self._line(name) + "\n")
        self._drawn = True
        self.stream.flush()
