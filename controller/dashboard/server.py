"""A local web server that shows the fabric live (or a kept run again): its topology drawn
from the topology file, each link coloured by its measured rate against its configured rate,
each switch's CPU share, queues and drops, the experiment's progress and verdicts, the
optical schedule's current slice and a time line of reconfigurations, pushed to the browser
once a second as server-sent events.

One sampler thread makes each sample (:class:`~controller.dashboard.live.LiveSampler`, or
:class:`ReplaySampler` for a kept run) however many pages are open; each page's stream only
waits for the next one. It binds to 127.0.0.1 unless told otherwise: what it serves is
read-only (node and link names, rates, entry counts), but anyone who can reach the port can
see it.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

from controller.dashboard.live import EMPTY_DRAWING
from controller.dashboard.page import PAGE
from controller.dashboard.recorder import Recording

__all__ = ["Dashboard", "ReplaySampler", "Sampler"]

#: samples kept for a page that fell behind
HISTORY = 64


class Sampler(Protocol):
    def run(self, publish: Callable[[dict[str, Any]], None], stop: threading.Event) -> None: ...

    def drawing(self) -> dict[str, Any]: ...

    def switch(self, name: str) -> Mapping[str, Any] | None: ...


class ReplaySampler:
    """A kept run's samples sent again, spaced as they were recorded (``speed`` times faster),
    from when the first page opens its stream (:attr:`watched`)."""

    def __init__(self, recording: Recording, *, speed: float = 1.0) -> None:
        self.recording = recording
        self.speed = speed
        self.watched = threading.Event()
        self._samples = recording.samples()
        self._seq = -1

    def drawing(self) -> dict[str, Any]:
        return {**(self.recording.topology(self._seq) or EMPTY_DRAWING), "fabric_seq": self._seq}

    def switch(self, name: str) -> Mapping[str, Any] | None:
        return None  # a kept run's switches are gone

    def run(self, publish: Callable[[dict[str, Any]], None], stop: threading.Event) -> None:
        while not self.watched.wait(0.2):
            if stop.is_set():
                return
        last_t: float | None = None
        total = len(self._samples)
        for i, sample in enumerate(self._samples, 1):
            if last_t is not None and stop.wait(max(0.0, (sample["t"] - last_t) / self.speed)):
                return
            last_t = sample["t"]
            self._seq = int(sample.get("fabric_seq", -1))
            publish({**sample, "replay": {"index": i, "of": total, "folder": str(self.recording.path.parent)}})


class Dashboard:
    """The server; ``with Dashboard(LiveSampler()) as d: print(d.url)``."""

    def __init__(self, sampler: Sampler, *, host: str = "127.0.0.1", port: int = 8765) -> None:
        self.sampler = sampler
        self._sample: dict[str, Any] = {"seq": 0, "t": time.time(), "links": [], "switches": []}
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._sampling_done = threading.Event()
        self._sent: dict[int, int] = {}  # each open stream's last sample
        #: the latest samples: a page that fell behind (a fast replay) gets each in order
        self._history: deque[dict[str, Any]] = deque(maxlen=HISTORY)
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}/"

    def latest(self) -> Mapping[str, Any]:
        with self._changed:
            return self._sample

    def _publish(self, sample: dict[str, Any]) -> None:
        with self._changed:
            self._sample = sample
            self._history.append(sample)
            self._changed.notify_all()

    def start(self) -> Dashboard:
        targets = (("server", self._server.serve_forever), ("sampler", lambda: self.sampler.run(self._publish,
                                                                                                self._sampling_done)))
        for name, target in targets:
            t = threading.Thread(target=target, daemon=True, name=f"dashboard-{name}")
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        """The sampler's last sample (what the run ended with) reaches every open page, then the
        server closes."""
        self._sampling_done.set()
        for t in self._threads:
            if t.name == "dashboard-sampler":
                t.join(timeout=5)
        with self._changed:
            final = self._sample["seq"]
            self._changed.wait_for(lambda: all(seq == final for seq in self._sent.values()), timeout=2)
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        self._server.shutdown()
        self._server.server_close()
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> Dashboard:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_samples(self, seq: int) -> list[dict[str, Any]] | None:
        """The samples after ``seq`` (waiting up to 30 s for one; [] if none came), None once stopped."""
        with self._changed:
            self._changed.wait_for(lambda: self._sample["seq"] > seq or self._stop.is_set(), timeout=30)
            if self._stop.is_set():
                return None
            return [s for s in self._history if s["seq"] > seq]

    def _tables(self, name: str) -> tuple[int, dict[str, Any]]:
        from controller.dashboard.switches import table_sizes

        sw = self.sampler.switch(name)
        if sw is None or not sw.get("grpc"):
            return 404, {"error": f"no running switch {name!r}"}
        try:
            return 200, {"switch": name, "tables": table_sizes(str(sw["grpc"]), int(sw["device_id"]),
                                                               str(sw["program"]))}
        except Exception as exc:
            return 502, {"error": f"{name}: {exc}"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        dashboard = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # the fabric's terminal stays quiet
                pass

            def _send(self, body: bytes, mime: str, status: int = 200) -> None:
                self.send_response(status)
                self.send_header("Content-Type", mime)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _json(self, data: object, status: int = 200) -> None:
                self._send(json.dumps(data).encode(), "application/json", status)

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path == "/":
                    self._send(PAGE.encode(), "text/html; charset=utf-8")
                elif path == "/api/topology":
                    self._json(dashboard.sampler.drawing())
                elif path == "/api/sample":
                    self._json(dashboard.latest())
                elif path == "/api/stream":
                    self._stream()
                elif path.startswith("/api/tables/"):
                    status, data = dashboard._tables(unquote(path.removeprefix("/api/tables/")))
                    self._json(data, status)
                else:
                    self.send_error(404, "no such page: /, /api/topology, /api/sample, /api/stream, "
                                         "/api/tables/SWITCH")

            def _stream(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                seq = 0  # the placeholder before the first sample is not sent
                me = threading.get_ident()
                watched = getattr(dashboard.sampler, "watched", None)
                if watched is not None:
                    watched.set()
                try:
                    self._send_samples(me, seq)
                finally:
                    with dashboard._changed:
                        dashboard._sent.pop(me, None)
                        dashboard._changed.notify_all()

            def _send_samples(self, me: int, seq: int) -> None:
                while True:
                    samples = dashboard._next_samples(seq)
                    if samples is None:
                        return
                    body = "".join(f"data: {json.dumps(s)}\n\n" for s in samples) or ": idle\n\n"
                    try:  # nothing new for 30 s (a finished replay): a comment keeps the connection
                        self.wfile.write(body.encode())
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        return  # the page was closed
                    if samples:
                        seq = samples[-1]["seq"]
                        with dashboard._changed:
                            dashboard._sent[me] = seq
                            dashboard._changed.notify_all()

        return Handler


def replay(folder: Path, *, speed: float = 1.0) -> ReplaySampler:
    """The sampler of a results folder's kept dashboard."""
    from controller.dashboard.recorder import FILE_NAME

    return ReplaySampler(Recording(folder / FILE_NAME), speed=speed)
