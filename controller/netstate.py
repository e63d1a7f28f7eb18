"""A record of every network resource mlfabric creates, so that it can always be removed.

Each emulation (or test) opens a :class:`NetRecord`. Before it creates a namespace, a link
or a process it writes that resource to a JSON file in the state directory; leaving the
``with`` block removes everything recorded. If the process dies first, ``mlfabric
clean-net`` (and the test suite's finalizer) reads the leftover records and removes what
they name, and nothing else: processes are only signalled when their command line still
carries the marker recorded with them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

__all__ = ["NetRecord", "clean_all", "interface_owner", "live_records", "state_dir"]

log = logging.getLogger(__name__)


def state_dir() -> Path:
    base = Path(os.environ.get("MLFABRIC_STATE_DIR", "/run/mlfabric" if os.geteuid() == 0 else f"/tmp/mlfabric-{os.getuid()}"))
    base.mkdir(parents=True, exist_ok=True)
    return base


@dataclass(slots=True)
class _Contents:
    name: str
    pids: list[tuple[int, str]] = field(default_factory=list)  # (pid, cmdline marker)
    links: list[str] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _kill(pid: int, marker: str, timeout: float = 3.0) -> bool:
    """SIGTERM then SIGKILL ``pid`` (and its process group) if it still runs ``marker``."""
    if marker not in _cmdline(pid):
        return False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker not in _cmdline(pid):
                return True
            time.sleep(0.02)
    return marker not in _cmdline(pid)


def _ip(*args: str) -> bool:
    proc = subprocess.run(["ip", *args], capture_output=True, check=False)
    return proc.returncode == 0


class NetRecord:
    """Record resources as they are created; remove them all on exit.

    Examples
    --------
    >>> import tempfile, os
    >>> os.environ["MLFABRIC_STATE_DIR"] = tempfile.mkdtemp()
    >>> with NetRecord("doctest") as rec:
    ...     rec.path.exists()
    True
    >>> rec.path.exists()
    False
    """

    def __init__(self, name: str) -> None:
        self._c = _Contents(name)
        self.path = state_dir() / f"{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"

    def __enter__(self) -> NetRecord:
        self._save()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def _save(self) -> None:
        data = {"name": self._c.name, "pids": self._c.pids, "links": self._c.links, "netns": self._c.netns}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.path)

    def add_pid(self, pid: int, marker: str) -> None:
        self._c.pids.append((pid, marker))
        self._save()

    def add_link(self, name: str) -> None:
        self.add_links((name,))

    def add_links(self, names: Iterable[str]) -> None:
        """Record interfaces to delete at clean-up (one write for them all)."""
        known = set(self._c.links)
        new = [n for n in dict.fromkeys(names) if n not in known]
        if new:
            self._c.links.extend(new)
            self._save()

    def add_netns(self, name: str) -> None:
        self._c.netns.append(name)
        self._save()

    def cleanup(self) -> list[str]:
        removed = _remove(self._c)
        self.path.unlink(missing_ok=True)
        return removed


def _remove(c: _Contents) -> list[str]:
    removed = []
    for pid, marker in reversed(c.pids):
        if _kill(pid, marker):
            removed.append(f"process {pid} ({marker})")
    for link in c.links:
        if Path(f"/sys/class/net/{link}").exists() and _ip("link", "del", link):
            removed.append(f"link {link}")
    for ns in c.netns:
        if Path(f"/run/netns/{ns}").exists() and _ip("netns", "del", ns):
            removed.append(f"netns {ns}")
    return removed


def _owner_alive(path: Path) -> bool:
    """Whether the process that wrote a record still runs (the caller itself counts as gone)."""
    parts = path.stem.split("-")
    if len(parts) < 3 or not parts[-2].isdigit():
        return False
    pid = int(parts[-2])
    return pid != os.getpid() and Path(f"/proc/{pid}").exists()


def interface_owner(name: str) -> str:
    """Who holds network interface ``name``, as a sentence for an error message: the live
    process whose record lists it, or else a crashed run's leftover (a live owner wins over a
    dead record that also names it, since interfaces are named by the topology, not the run)."""
    leftover = None
    for path in sorted(state_dir().glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if name not in data.get("links", []):
            continue
        pid = path.stem.split("-")[-2]
        if _owner_alive(path):
            return (f"{data.get('name', path.stem)} is running (pid {pid}): stop it with Ctrl-C in its "
                    f"terminal or kill {pid}")
        leftover = leftover or path
    if leftover is not None:
        return f"a run that ended without cleaning up left it ({leftover.name}): mlfabric clean-net removes it"
    return "no mlfabric run recorded it: remove it with `ip link del` or mlfabric clean-net"


def live_records() -> list[tuple[str, int]]:
    """``(name, pid)`` of every record whose writing process still runs."""
    out = []
    for path in sorted(state_dir().glob("*.json")):
        if _owner_alive(path):
            try:
                name = json.loads(path.read_text()).get("name", path.stem)
            except (OSError, ValueError):
                name = path.stem
            out.append((str(name), int(path.stem.split("-")[-2])))
    return out


def clean_all(*, only_dead_owners: bool = False) -> list[str]:
    """Remove what the leftover records name; return a description of each removal.

    With ``only_dead_owners``, records whose writing process is still alive are kept (a
    test suite's finalizer uses this so as not to tear down a concurrent experiment).
    """
    removed: list[str] = []
    for path in sorted(state_dir().glob("*.json")):
        if only_dead_owners and _owner_alive(path):
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            log.warning("unreadable record %s: removed", path)
            path.unlink(missing_ok=True)
            continue
        contents = _Contents(
            data.get("name", path.stem),
            [(int(p), str(m)) for p, m in data.get("pids", [])],
            list(data.get("links", [])),
            list(data.get("netns", [])),
        )
        removed.extend(_remove(contents))
        path.unlink(missing_ok=True)
    return removed
