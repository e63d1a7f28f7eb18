"""Reading a running dashboard from a script: the next samples of its event stream, as the
page receives them (``/api/stream``), for a researcher who logs the fabric or a test that
checks what the page is sent."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

from controller.errors import MlfabricError

__all__ = ["next_samples"]


def next_samples(url: str, count: int, *, timeout: float = 20.0) -> list[dict[str, Any]]:
    """The next ``count`` samples the dashboard at ``url`` (``http://HOST:PORT/``) sends.
    A stream that does not answer as one raises :class:`MlfabricError` naming the URL; one
    that stays silent for ``timeout`` seconds raises :class:`TimeoutError`."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or not parts.port:
        raise MlfabricError(f"not a dashboard URL (http://HOST:PORT/): {url!r}")
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", "/api/stream")
        resp = conn.getresponse()
        if resp.status != 200 or resp.getheader("Content-Type") != "text/event-stream":
            raise MlfabricError(f"{url} is not a dashboard's stream (HTTP {resp.status})")
        out: list[dict[str, Any]] = []
        while len(out) < count:
            line = resp.readline()
            if not line:
                raise MlfabricError(f"{url} closed its stream after {len(out)} of {count} samples")
            if line.startswith(b"data: "):
                out.append(json.loads(line[6:]))
        return out
    finally:
        conn.close()
