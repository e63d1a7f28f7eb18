"""A local web server that shows the running fabric live: its topology drawn from the topology
file, each link coloured by its measured rate against its configured rate, pushed to the
browser once a second as server-sent events.

One sampler thread reads the switch ports' byte counters (``/sys/class/net``) once per
interval, however many pages are open; each page's stream only waits for the next sample.
It binds to 127.0.0.1 unless told otherwise: what it serves is read-only (node and link
names, addresses of nothing, rates), but anyone who can reach the port can see it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from controller.dashboard.page import PAGE
from controller.dashboard.rates import Counters, link_name, link_rates, watched_interface
from controller.topology.draw import positions
from controller.topology.model import Topology

__all__ = ["Dashboard", "read_counters", "topology_json"]

SYS_NET = Path("/sys/class/net")


def read_counters(interfaces: Iterable[str], root: Path = SYS_NET) -> dict[str, Counters]:
    """``(tx_bytes, rx_bytes)`` of each interface that exists now."""
    out = {}
    for name in interfaces:
        stats = root / name / "statistics"
        try:
            out[name] = (int((stats / "tx_bytes").read_text()), int((stats / "rx_bytes").read_text()))
        except (OSError, ValueError):
            continue
    return out


def topology_json(topo: Topology) -> dict[str, Any]:
    """What the page draws: nodes with their place (x in [0, 1], tier 0 = servers) and links."""
    pos = positions(topo)
    nodes = [{"name": h.name, "kind": "host", "x": pos[h.name][0], "y": pos[h.name][1]} for h in topo.hosts]
    nodes += [{"name": s.name, "kind": "switch", "role": s.role, "x": pos[s.name][0], "y": pos[s.name][1]}
              for s in topo.switches]
    links = [{"link": link_name(lk), "a": lk.a.node, "b": lk.b.node, "interface": watched_interface(topo, lk),
              "rate_mbps": lk.rate_mbps} for lk in topo.links]
    return {"name": topo.name, "nodes": nodes, "links": links}


class Dashboard:
    """The server for ``topo``; ``with Dashboard(topo) as d: print(d.url)``."""

    def __init__(self, topo: Topology, *, host: str = "127.0.0.1", port: int = 8765, interval_s: float = 1.0,
                 counters_root: Path = SYS_NET) -> None:
        self.topo = topo
        self.interval_s = interval_s
        self._root = counters_root
        self._interfaces = sorted({watched_interface(topo, lk) for lk in topo.links})
        self._sample: dict[str, Any] = {"seq": 0, "t": time.time(), "links": []}
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._topology = json.dumps(topology_json(topo)).encode()
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

    def start(self) -> Dashboard:
        for target in (self._server.serve_forever, self._sampler):
            t = threading.Thread(target=target, daemon=True, name=f"dashboard-{target.__name__}")
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
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

    def _sampler(self) -> None:
        before, t0 = read_counters(self._interfaces, self._root), time.monotonic()
        while not self._stop.wait(self.interval_s):
            after, t1 = read_counters(self._interfaces, self._root), time.monotonic()
            rates = [r.as_json() for r in link_rates(self.topo, before, after, t1 - t0)]
            with self._changed:
                self._sample = {"seq": self._sample["seq"] + 1, "t": time.time(), "links": rates}
                self._changed.notify_all()
            before, t0 = after, t1

    def _next_sample(self, seq: int) -> dict[str, Any] | None:
        with self._changed:
            self._changed.wait_for(lambda: self._sample["seq"] > seq or self._stop.is_set(), timeout=30)
            return None if self._stop.is_set() else self._sample

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        dashboard = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # the fabric's terminal stays quiet
                pass

            def _send(self, body: bytes, mime: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", mime)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/":
                    self._send(PAGE.encode(), "text/html; charset=utf-8")
                elif self.path == "/api/topology":
                    self._send(dashboard._topology, "application/json")
                elif self.path == "/api/sample":
                    self._send(json.dumps(dashboard.latest()).encode(), "application/json")
                elif self.path == "/api/stream":
                    self._stream()
                else:
                    self.send_error(404, "no such page: /, /api/topology, /api/sample, /api/stream")

            def _stream(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                seq = -1
                while True:
                    sample = dashboard._next_sample(seq)
                    if sample is None:
                        return
                    seq = sample["seq"]
                    try:
                        self.wfile.write(f"data: {json.dumps(sample)}\n\n".encode())
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        return  # the page was closed

        return Handler
