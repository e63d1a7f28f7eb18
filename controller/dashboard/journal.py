"""The fabric's journal: what happens to the fabrics on this machine, one JSON object per line
in ``<state dir>/events.jsonl``, for the dashboard to follow from any process.

Writers are the parts that make things happen: a fabric coming up or going down
(:class:`~mininet.fabric_net.EmulatedFabric`), an experiment's run, units and verdicts
(:mod:`controller.experiments.core`), a schedule installed or a reconfiguration's phases
(:mod:`controller.schedule.install`, :mod:`controller.reconfigure.apply`). Each event is one
``write`` of one line to a file opened for appending, so lines from several processes never
interleave. A handful of lines per run: nothing here is on a packet's path.

A reader (:class:`JournalReader`) tails the file from where it last stopped; the file is
started afresh when a fabric comes up and it has grown past :data:`KEEP_BYTES`.

Event kinds (every event also has ``t``, wall-clock seconds, and ``pid``, the writer's):

- ``fabric-up``: ``topology`` (the live topology as a dict), ``switch_pids``
- ``fabric-down``: ``name``
- ``run``: ``experiment``, ``folder``, ``units``; ``unit``: ``index``, ``of``, ``name``;
  ``verdict``: ``comparison``, ``outcome``, ``decided``, ``why``; ``run-end``: ``status``
- ``schedule``: ``name``, ``schedule_kind``, ``slice_us``, ``period_us``, ``epoch_t``, ``circuits``
  (each circuit switch's slices and offset)
- ``reconfiguration``: ``phase`` (commit, cut, finish, clean-up, rollback), ``schedule``,
  ``version``, ``at`` (the wall time the phase happens, for a cut still to come)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.netstate import state_dir

__all__ = ["KEEP_BYTES", "JournalReader", "journal_path", "record", "wall_time_of"]

#: a journal longer than this starts afresh when the next fabric comes up
KEEP_BYTES = 4 << 20

#: one event's line at most (a 1,024-GPU topology is far less); longer events are cut to a stub
MAX_LINE = 8 << 20


def journal_path() -> Path:
    return state_dir() / "events.jsonl"


def record(kind: str, **fields: Any) -> None:
    """Append one event. Never raises: a journal that cannot be written costs the dashboard
    its view, never the fabric or the run."""
    event = {"t": round(time.time(), 6), "pid": os.getpid(), "kind": kind, **fields}
    try:
        line = json.dumps(event, default=str, allow_nan=False) + "\n"
    except ValueError:
        line = json.dumps({"t": event["t"], "pid": event["pid"], "kind": kind, "error": "not JSON"}) + "\n"
    if len(line) > MAX_LINE:
        line = json.dumps({"t": event["t"], "pid": event["pid"], "kind": kind, "error": "too long"}) + "\n"
    try:
        path = journal_path()
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        if kind == "fabric-up" and path.exists() and path.stat().st_size > KEEP_BYTES:
            flags |= os.O_TRUNC
        fd = os.open(path, flags, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def wall_time_of(monotonic_us: float) -> float:
    """A time on the controller's clock (µs, monotonic) as wall-clock seconds."""
    return time.time() - (time.monotonic_ns() / 1000 - monotonic_us) / 1e6


class JournalReader:
    """Tails a journal: :meth:`read` returns the events written since the last call (all of
    them the first time), starting again from the top when the file was started afresh."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or journal_path()
        self._offset = 0
        self._inode: int | None = None
        self._partial = b""

    def read(self) -> list[Mapping[str, Any]]:
        try:
            st = self.path.stat()
        except OSError:
            return []
        if st.st_ino != self._inode or st.st_size < self._offset:
            self._inode, self._offset, self._partial = st.st_ino, 0, b""
        if st.st_size == self._offset:
            return []
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read(st.st_size - self._offset)
        except OSError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        events: list[Mapping[str, Any]] = []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("kind"), str):
                events.append(event)
        return events
