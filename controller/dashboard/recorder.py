"""A run's dashboard kept for later: every sample the page was sent, the journal's events and
each fabric's drawing, in ``dashboard.sqlite`` in the run's folder (SQLite from the standard
library: one file, opened by ``mlfabric dashboard --replay FOLDER``).

>>> import tempfile, pathlib
>>> with tempfile.TemporaryDirectory() as d:
...     with Recorder(pathlib.Path(d) / "dashboard.sqlite") as r:
...         r.topology(1, {"name": "t", "nodes": [], "links": []})
...         r.sample({"seq": 1, "t": 5.0, "fabric_seq": 1, "links": []})
...         r.event({"t": 4.0, "kind": "run"})
...     kept = Recording(pathlib.Path(d) / "dashboard.sqlite")
...     [s["seq"] for s in kept.samples()], kept.topology(1)["name"], [e["kind"] for e in kept.events()]
([1], 't', ['run'])
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.experiments.html_report import DASHBOARD_FILE

__all__ = ["FILE_NAME", "Recorder", "Recording"]

#: in the run's results folder (its index.html says how to replay it)
FILE_NAME = DASHBOARD_FILE

_SCHEMA = """
CREATE TABLE IF NOT EXISTS samples (seq INTEGER PRIMARY KEY, t REAL NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS topologies (fabric_seq INTEGER PRIMARY KEY, body TEXT NOT NULL);
"""


class Recorder:
    """Writes one run's samples, events and drawings (each write committed: a run stopped by a
    signal keeps what was sent so far)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.executescript(_SCHEMA)

    def sample(self, sample: Mapping[str, Any]) -> None:
        self._write("INSERT OR REPLACE INTO samples VALUES (?, ?, ?)", (sample["seq"], sample["t"], json.dumps(sample)))

    def event(self, event: Mapping[str, Any]) -> None:
        self._write("INSERT INTO events (t, body) VALUES (?, ?)", (event.get("t", 0.0), json.dumps(event)))

    def topology(self, fabric_seq: int, drawing: Mapping[str, Any]) -> None:
        self._write("INSERT OR REPLACE INTO topologies VALUES (?, ?)", (fabric_seq, json.dumps(drawing)))

    def _write(self, sql: str, values: tuple[Any, ...]) -> None:
        with self._db:
            self._db.execute(sql, values)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Recording:
    """A kept run, read back."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise FileNotFoundError(path)
        self.path = path

    def _rows(self, sql: str) -> list[Any]:
        db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            return [json.loads(body) for (body,) in db.execute(sql)]
        finally:
            db.close()

    def samples(self) -> list[dict[str, Any]]:
        return self._rows("SELECT body FROM samples ORDER BY seq")

    def events(self) -> list[dict[str, Any]]:
        return self._rows("SELECT body FROM events ORDER BY id")

    def topology(self, fabric_seq: int) -> dict[str, Any] | None:
        rows = self._rows(f"SELECT body FROM topologies WHERE fabric_seq = {int(fabric_seq)}")
        return rows[0] if rows else None
