"""A minimal pcap writer for ``--pcap DIR`` (one file per port and direction, as BMv2)."""

from __future__ import annotations

import struct
import threading
import time
from pathlib import Path
from typing import BinaryIO

__all__ = ["PcapWriter"]

_GLOBAL_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)


class PcapWriter:
    """Append Ethernet frames to a pcap file, thread-safely, flushing each record."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._f: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._f.write(_GLOBAL_HEADER)
        self._f.flush()

    def write(self, frame: bytes, ts: float | None = None) -> None:
        ts = time.time() if ts is None else ts
        sec = int(ts)
        usec = int((ts - sec) * 1_000_000)
        with self._lock:
            self._f.write(struct.pack("<IIII", sec, usec, len(frame), len(frame)))
            self._f.write(frame)
            self._f.flush()

    def close(self) -> None:
        with self._lock:
            self._f.close()
