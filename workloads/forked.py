"""Start a job's workers forked from zygotes (:mod:`workloads.zygote`), as a PopenFactory.

:class:`ForkingFactory` is a :data:`~workloads.driver.PopenFactory`: asked for the first
rank of a server, it makes the pipes of every rank of that server, starts one zygote in the
server (``server_popen``, e.g. Mininet's ``host.popen``) handing it their far ends (or, with
``netns_of``, one zygote here for every rank, each worker entering its server's network
namespace), and answers each rank with a :class:`ForkedWorker`, which behaves as the Popen of that worker
does for :class:`~workloads.driver.WorkerGroup`: its pipes, its pid, ``poll``, ``wait``
and signals (sent to the worker itself; the zygote reports how it ended). Call
:meth:`ForkingFactory.close` after the group's: it reaps the zygotes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import IO, Any

from workloads.errors import WorkloadError
from workloads.plan import Rank

__all__ = ["ForkedWorker", "ForkingFactory", "ServerPopen"]

log = logging.getLogger(__name__)

#: ``server_popen(server, argv, pass_fds)``: a process in that server (stdin and stdout
#: pipes; stderr too), the descriptors inherited
ServerPopen = Callable[[int, list[str], Sequence[int]], "subprocess.Popen[Any]"]
#: how long a worker's pid may take to be reported by its zygote
PID_TIMEOUT_S = 60.0


class ForkedWorker:
    """A worker forked by a zygote, seen as its Popen (the parts WorkerGroup uses)."""

    def __init__(self, rank: int, stdin: IO[bytes], stdout: IO[bytes], stderr: IO[bytes]) -> None:
        self.rank = rank
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self._pid: int | None = None
        self._started = threading.Event()
        self._ended = threading.Event()

    # the zygote's reports
    def _forked(self, pid: int) -> None:
        self._pid = pid
        self._started.set()

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._started.set()
        self._ended.set()

    @property
    def pid(self) -> int:
        if not self._started.wait(PID_TIMEOUT_S) or self._pid is None:
            raise WorkloadError(f"rank {self.rank}: its zygote never reported the worker's pid")
        return self._pid

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"rank {self.rank}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None and self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Zygote:
    """One server's zygote: its process and the thread reading its reports."""

    def __init__(self, server: int, proc: subprocess.Popen[Any], workers: dict[int, ForkedWorker]) -> None:
        self.server, self.proc, self.workers = server, proc, workers
        self.stderr_tail: list[str] = []
        self.reader = threading.Thread(target=self._read, name=f"zygote{server}", daemon=True)
        self.reader.start()
        self.err_reader = threading.Thread(target=self._read_stderr, name=f"zygote{server}-err", daemon=True)
        self.err_reader.start()

    @property
    def name(self) -> str:
        return "the job's zygote" if self.server < 0 else f"server {self.server}'s zygote"

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with contextlib.suppress(OSError, ValueError):
            for raw in self.proc.stdout:
                parts = raw.decode(errors="replace").split()
                if len(parts) != 3 or parts[0] not in ("forked", "exit") \
                        or not all(p.lstrip("-").isdigit() for p in parts[1:]) \
                        or int(parts[1]) not in self.workers:
                    log.warning("%s: unexpected line %r", self.name, raw[:200])
                    continue
                w = self.workers[int(parts[1])]
                (w._forked if parts[0] == "forked" else w._exited)(int(parts[2]))
        code = self.proc.wait()
        for w in self.workers.values():  # a zygote that died cannot report its workers' ends
            if w.returncode is None:
                if w._pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(w._pid, signal.SIGKILL)
                w._exited(code if code else -signal.SIGKILL)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        with contextlib.suppress(OSError, ValueError):
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip()
                self.stderr_tail = [*self.stderr_tail[-19:], line]
                log.warning("%s: %s", self.name, line)


class ForkingFactory:
    """A PopenFactory forking the job's workers from zygotes (see the module): one per
    server started in it by ``server_popen``, or, given ``netns_of`` (a server's network
    namespace path), one for the whole job started here, each worker entering its server's
    namespace after the fork (one import for 1,024 GPUs instead of 128)."""

    def __init__(self, ranks: Sequence[Rank], server_popen: ServerPopen | None = None, *,
                 netns_of: Callable[[int], str] | None = None, python: str = sys.executable,
                 nice: int = 0) -> None:
        if (server_popen is None) == (netns_of is None):
            raise WorkloadError("ForkingFactory: give server_popen (a zygote per server) or netns_of (one)")
        self._by_server: dict[int, list[Rank]] = {}
        for r in ranks:
            self._by_server.setdefault(r.server, []).append(r)
        self._ranks = list(ranks)
        self._server_popen, self._netns_of = server_popen, netns_of
        self._python, self._nice = python, nice
        self._workers: dict[int, ForkedWorker] = {}
        self._zygotes: dict[int, _Zygote] = {}

    def __call__(self, rank: Rank, argv: list[str]) -> ForkedWorker:
        """The worker of ``rank``; ``argv`` is its worker command line (its --config and
        --log-level are what the zygote takes)."""
        if rank.rank not in self._workers:
            if self._netns_of is not None:
                self._start(-1, self._ranks, argv, self._local_popen)
            else:
                ranks = self._by_server.get(rank.server)
                if not ranks:
                    raise WorkloadError(f"server {rank.server} has no rank in this job")
                self._start(rank.server, ranks, argv, self._server_popen)
        return self._workers[rank.rank]

    def _local_popen(self, server: int, argv: list[str], pass_fds: Sequence[int]) -> subprocess.Popen[Any]:
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=tuple(pass_fds))

    def _start(self, key: int, ranks: Sequence[Rank], argv: list[str], popen: ServerPopen | None) -> None:
        """One zygote for ``ranks`` (``key``: its server, -1 for the job's)."""
        assert popen is not None
        config, level = _option(argv, "--config"), _option(argv, "--log-level") or "INFO"
        if config is None:
            raise WorkloadError(f"no --config in the worker command line {argv}")
        far: list[int] = []
        workers: dict[int, ForkedWorker] = {}
        specs: list[str] = []
        try:
            for r in ranks:
                in_r, in_w = os.pipe()
                out_r, out_w = os.pipe()
                err_r, err_w = os.pipe()
                far += [in_r, out_w, err_w]
                netns = f":{self._netns_of(r.server)}" if self._netns_of is not None else ""
                specs += ["--rank", f"{r.rank}:{in_r}:{out_w}:{err_w}{netns}"]
                workers[r.rank] = ForkedWorker(r.rank, os.fdopen(in_w, "wb", buffering=0),
                                               os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb"))
            cmd = [self._python, "-m", "workloads.zygote", "--config", config, "--log-level", level,
                   "--nice", str(self._nice), *specs]
            proc = popen(key, cmd, far)
        except BaseException:
            for w in workers.values():
                for stream in (w.stdin, w.stdout, w.stderr):
                    stream.close()
            raise
        finally:
            for fd in far:  # the zygote has its own copies (or failed to start)
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._zygotes[key] = _Zygote(key, proc, workers)
        self._workers.update(workers)

    def close(self, timeout_s: float = 10.0) -> None:
        """Reap every zygote (it exits once its workers have): SIGTERM then SIGKILL after
        ``timeout_s``."""
        for z in self._zygotes.values():
            try:
                z.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("%s still runs after %g s: terminating it", z.name, timeout_s)
                z.proc.terminate()
                try:
                    z.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    z.proc.kill()
                    z.proc.wait()
            z.reader.join(timeout=5)
            for stream in (z.proc.stdin, z.proc.stdout, z.proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()

    def __enter__(self) -> ForkingFactory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _option(argv: list[str], name: str) -> str | None:
    """The value after ``name`` in ``argv``, or None.

    >>> _option(["python", "-m", "w", "--config", "/j.json", "--rank", "3"], "--config")
    '/j.json'
    """
    with contextlib.suppress(ValueError, IndexError):
        return argv[argv.index(name) + 1]
    return None
