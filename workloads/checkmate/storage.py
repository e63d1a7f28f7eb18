"""A checkpoint store on the fabric: a real HTTP server on a host's socket, so that persisting
a checkpoint crosses the emulated network and competes with training traffic, as it does in
a cluster (Checkmate's baselines persist to remote storage; CheckFreq to disk, Gemini to
peers' memory).

Protocol, plain HTTP/1.1:

- ``PUT /NAME`` with ``Content-Length`` stores the body atomically (a temporary file,
  fsync, rename, fsync of the directory) and answers ``201`` with JSON ``{"name", "bytes",
  "sha256"}``, the digest of what it stored; :func:`put` checks it against what it sent.
- ``PUT /NAME?offset=O&total=T`` stores one chunk of a checkpoint sent in pieces (Gemini's
  interleaving sends a checkpoint a chunk per idle gap): chunks arrive in order, each at the
  offset the store has reached (else ``409``); it answers ``202`` with ``{"received"}`` until
  the last chunk, which commits the whole atomically and answers ``201`` as above.
- ``GET /NAME`` answers the stored bytes, or ``404``.
- A name is ``[A-Za-z0-9._-]+`` (no paths); anything else is ``400``, with the reason.

Run it in a host: ``python -m workloads.checkmate.storage --dir D --bind ADDR --port P``;
it prints ``READY <port>`` once it listens.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import re
import sys
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from workloads.errors import WorkloadError

__all__ = ["StorageError", "get", "main", "put", "put_chunk", "serve"]

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
#: the largest checkpoint the store takes (a guard against a runaway writer)
MAX_BYTES = 4 << 30
_CHUNK = 1 << 20


class StorageError(WorkloadError):
    """A checkpoint could not be stored or fetched: names the URL and why."""


def _name(path: str) -> str | None:
    name = path.lstrip("/")
    return name if _NAME.match(name) and name not in (".", "..") else None


class _Handler(BaseHTTPRequestHandler):
    server: _Store
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, code: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, code: int, why: str) -> None:
        self._answer(code, json.dumps({"error": why}).encode())

    def do_PUT(self) -> None:
        path, _, query = self.path.partition("?")
        name = _name(path)
        if name is None:
            return self._error(400, f"bad checkpoint name {self.path!r}: use [A-Za-z0-9._-]+")
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            return self._error(411, "PUT needs a Content-Length")
        size = int(length)
        if size > MAX_BYTES:
            return self._error(413, f"{size} bytes is more than the store takes ({MAX_BYTES})")
        if query:
            return self._put_chunk(name, size, query)
        target = self.server.directory / name
        tmp = target.with_name(f".{name}.tmp-{threading.get_ident()}")
        digest = hashlib.sha256()
        try:
            with open(tmp, "wb") as f:
                self._receive(f, size, digest)
            self._commit(tmp, target)
        except (OSError, ConnectionError) as exc:
            tmp.unlink(missing_ok=True)
            self.close_connection = True
            return self._error(500, f"storing {name}: {exc}")
        self._answer(201, json.dumps({"name": name, "bytes": size, "sha256": digest.hexdigest()}).encode())

    def _receive(self, f: Any, size: int, digest: Any) -> None:
        left = size
        while left:
            chunk = self.rfile.read(min(left, _CHUNK))
            if not chunk:
                raise ConnectionError(f"the client sent {size - left} of {size} bytes")
            f.write(chunk)
            digest.update(chunk)
            left -= len(chunk)
        f.flush()
        os.fsync(f.fileno())

    def _commit(self, tmp: Path, target: Path) -> None:
        os.replace(tmp, target)
        fd = os.open(self.server.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _put_chunk(self, name: str, size: int, query: str) -> None:
        """One chunk of a checkpoint sent in pieces, in order; the last one commits it."""
        q = parse_qs(query)
        try:
            offset, total = int(q["offset"][0]), int(q["total"][0])
        except (KeyError, ValueError, IndexError):
            return self._error(400, f"a chunk needs integer offset and total (got {query!r})")
        if not 0 <= offset <= total <= MAX_BYTES or offset + size > total:
            return self._error(400, f"chunk {offset}+{size} does not fit in total {total}")
        target = self.server.directory / name
        partial = target.with_name(f".{name}.partial")
        with self.server.lock:
            reached = partial.stat().st_size if offset and partial.exists() else 0
            if offset != reached:
                self.close_connection = True
                return self._error(409, f"chunk at {offset} of {name}: the store has {reached} bytes")
            digest = hashlib.sha256()
            try:
                with open(partial, "r+b" if offset else "wb") as f:
                    f.seek(offset)
                    self._receive(f, size, digest)
                if offset + size < total:
                    return self._answer(202, json.dumps({"name": name, "received": offset + size}).encode())
                whole = hashlib.sha256(partial.read_bytes()).hexdigest()
                self._commit(partial, target)
            except (OSError, ConnectionError) as exc:
                partial.unlink(missing_ok=True)
                self.close_connection = True
                return self._error(500, f"storing {name}: {exc}")
        self._answer(201, json.dumps({"name": name, "bytes": total, "sha256": whole}).encode())

    def do_GET(self) -> None:
        name = _name(self.path.partition("?")[0])
        if name is None:
            return self._error(400, f"bad checkpoint name {self.path!r}: use [A-Za-z0-9._-]+")
        path = self.server.directory / name
        if not path.is_file():
            return self._error(404, f"no checkpoint {name}")
        self._answer(200, path.read_bytes(), "application/octet-stream")


class _Store(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], directory: Path) -> None:
        super().__init__(address, _Handler)
        self.directory = directory
        self.lock = threading.Lock()


def serve(directory: str | Path, host: str = "0.0.0.0", port: int = 0) -> _Store:
    """A store of ``directory`` listening on ``(host, port)`` (0: any free port), not yet
    serving: call ``serve_forever`` (a thread of its own, or the process's)."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    return _Store((host, port), root)


def _split(url: str) -> tuple[str, int, str]:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or not parts.path.strip("/"):
        raise StorageError(f"{url}: not a checkpoint URL (http://HOST:PORT/NAME)")
    return parts.hostname, parts.port or 80, parts.path + (f"?{parts.query}" if parts.query else "")


def _request(url: str, method: str, body: bytes | None, timeout_s: float) -> tuple[int, bytes]:
    host, port, path = _split(url)
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request(method, path, body=body, headers={"Content-Length": str(len(body or b""))} if body is not None
                     else {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException) as exc:
        raise StorageError(f"{method} {url}: {exc}") from exc
    finally:
        conn.close()


def _why(data: bytes) -> str:
    try:
        return str(json.loads(data)["error"])
    except (ValueError, KeyError, TypeError):
        return data[:120].decode(errors="replace")


def put(url: str, data: bytes, *, timeout_s: float = 120.0) -> dict[str, Any]:
    """Store ``data`` at ``url``; the store's answer, once its digest matches what was sent."""
    status, body = _request(url, "PUT", data, timeout_s)
    if status != 201:
        raise StorageError(f"PUT {url}: {status} {_why(body)}")
    answer = json.loads(body)
    if answer.get("sha256") != hashlib.sha256(data).hexdigest() or answer.get("bytes") != len(data):
        raise StorageError(f"PUT {url}: the store kept {answer.get('bytes')} bytes with another digest")
    return dict(answer)


def put_chunk(url: str, data: bytes, offset: int, total: int, *, whole_sha256: str = "",
              timeout_s: float = 120.0) -> dict[str, Any]:
    """Store ``data`` as the bytes at ``offset`` of a ``total``-byte checkpoint at ``url``;
    the last chunk commits it, and its answer's digest is checked against ``whole_sha256``."""
    status, body = _request(f"{url}?offset={offset}&total={total}", "PUT", data, timeout_s)
    last = offset + len(data) == total
    if status != (201 if last else 202):
        raise StorageError(f"PUT {url} (chunk at {offset} of {total}): {status} {_why(body)}")
    answer = json.loads(body)
    if last and whole_sha256 and answer.get("sha256") != whole_sha256:
        raise StorageError(f"PUT {url}: the store assembled {answer.get('bytes')} bytes with another digest")
    return dict(answer)


def get(url: str, *, timeout_s: float = 120.0) -> bytes:
    """The bytes stored at ``url``."""
    status, body = _request(url, "GET", None, timeout_s)
    if status != 200:
        raise StorageError(f"GET {url}: {status} {_why(body)}")
    return body


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m workloads.checkmate.storage", description=__doc__.split("\n")[0])
    p.add_argument("--dir", required=True, type=Path, help="where checkpoints are kept")
    p.add_argument("--bind", default="0.0.0.0", help="address to listen on")
    p.add_argument("--port", type=int, default=0, help="port (0: any free one)")
    a = p.parse_args(argv)
    try:
        store = serve(a.dir, a.bind, a.port)
    except OSError as exc:
        print(f"checkpoint store: cannot listen on {a.bind}:{a.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"READY {store.server_address[1]}", flush=True)
    try:
        store.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        store.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
