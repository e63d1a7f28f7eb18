"""Drive the workers of one job through their pipes (the experiment runner's side).

The runner lives in another network namespace than the workers, so it talks to them only
through stdin and stdout (:mod:`workloads.protocol`). In Mininet::

    factory = lambda rank, argv: hosts[rank.server].popen(argv, stdin=PIPE, stdout=PIPE, stderr=PIPE)
    with WorkerGroup(factory, config) as group:
        results = group.run({"op": "hier_allreduce", "bytes": 64 << 20, "iter": 0})

Mininet's ``Node.popen`` gives no stdin pipe unless asked: pass ``stdin=PIPE``. The factory
also decides the worker's environment (``PYTHONPATH`` when the package is not installed).
One thread per pipe reads the workers' output, so that no pipe fills up and blocks a worker.
"""

from __future__ import annotations

import io
import json
import logging
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from workloads.config import WorkloadConfig
from workloads.errors import CommandError, WorkerStartError, WorkloadError
from workloads.plan import Rank
from workloads.protocol import parse_command, parse_ready

__all__ = ["PopenFactory", "WorkerGroup", "worker_argv"]

log = logging.getLogger(__name__)

PopenFactory = Callable[[Rank, list[str]], "subprocess.Popen[Any]"]
#: workers whose failure to start is described in full (a 1,024-GPU job's would fill screens)
START_FAILURES_SHOWN = 5


def rank_ranges(ranks: Sequence[int]) -> str:
    """Sorted ranks as ranges.

    >>> rank_ranges([0, 1, 2, 3, 5, 7, 8, 9])
    '0-3, 5, 7-9'
    """
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def worker_argv(config_path: str | Path, rank: int, *, python: str = sys.executable,
                log_level: str = "INFO") -> list[str]:
    """The command line of one worker.

    >>> worker_argv("/tmp/job.json", 3, python="python3")
    ['python3', '-m', 'workloads.worker', '--config', '/tmp/job.json', '--rank', '3', '--log-level', 'INFO']
    """
    return [python, "-m", "workloads.worker", "--config", str(config_path), "--rank", str(rank),
            "--log-level", log_level]


class _Worker:
    """One worker process and the threads reading its stdout (into the group's queue) and stderr."""

    def __init__(self, rank: Rank, proc: subprocess.Popen[Any], events: queue.Queue[tuple[int, str | None]]) -> None:
        for name in ("stdin", "stdout", "stderr"):
            if getattr(proc, name) is None:
                proc.kill()
                proc.wait()
                raise WorkloadError(f"rank {rank.rank}: popen_factory must return a Popen with stdin, "
                                    f"stdout and stderr pipes ({name} is None): pass stdin=PIPE, ...")
        self.rank, self.proc = rank, proc
        self.stderr_tail: deque[str] = deque(maxlen=40)
        self.eof = False
        self.ready = False
        self.threads = [
            threading.Thread(target=self._pump, args=(proc.stdout, lambda s: events.put((rank.rank, s)),
                                                      lambda: events.put((rank.rank, None))),
                             name=f"stdout{rank.rank}", daemon=True),
            threading.Thread(target=self._pump, args=(proc.stderr, self._on_stderr, lambda: None),
                             name=f"stderr{rank.rank}", daemon=True),
        ]
        for t in self.threads:
            t.start()

    def _on_stderr(self, line: str) -> None:
        self.stderr_tail.append(line)
        log.debug("rank %d: %s", self.rank.rank, line)

    def _pump(self, stream: IO[Any], sink: Callable[[str], None], done: Callable[[], None]) -> None:
        try:
            for raw in iter(stream.readline, b"" if not isinstance(stream, io.TextIOBase) else ""):
                line = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
                sink(line.rstrip("\r\n"))
        except (OSError, ValueError) as exc:  # the pipe was closed under us at teardown
            log.debug("rank %d: pipe reader stopped: %s", self.rank.rank, exc)
        finally:
            done()

    def send(self, line: str) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        stdin.write(line + "\n" if isinstance(stdin, io.TextIOBase) else (line + "\n").encode())
        stdin.flush()

    def describe(self) -> str:
        """Who it is, whether it runs, and its last stderr lines."""
        code = self.proc.poll()
        if code is None and self.eof:  # stdout closed: it is exiting, let it be reaped
            try:
                code = self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                code = None
        for t in self.threads[1:]:
            t.join(timeout=1.0 if code is not None else 0.0)
        state = "still running" if code is None else f"exited with code {code}"
        tail = " | ".join(list(self.stderr_tail)[-8:]) or "(nothing)"
        r = self.rank
        return f"rank {r.rank} (server {r.server}, rail {r.rail}, {r.ip}) {state}; stderr: {tail}"


class WorkerGroup:
    """The workers of a job: start them, run commands on all of them, stop them.

    Parameters
    ----------
    popen_factory
        ``popen_factory(rank, argv) -> Popen`` starts one worker (``host.popen`` in Mininet),
        with pipes for stdin, stdout and stderr.
    config
        The job: the path of its JSON file (given to the workers as it is), or a
        :class:`WorkloadConfig` or its dict (written to ``workdir`` for the workers).
    ranks
        The ranks to start (default: all of ``config``).
    ready_timeout_s
        How long :meth:`start` waits for every READY (default: ``start_timeout_s + 15``).
    op_timeout_s
        How long :meth:`run` waits for the results by default.
    """

    def __init__(self, popen_factory: PopenFactory, config: WorkloadConfig | Mapping[str, Any] | str | Path,
                 ranks: Sequence[Rank] | None = None, *, ready_timeout_s: float | None = None,
                 op_timeout_s: float = 300.0, python: str = sys.executable,
                 workdir: str | Path | None = None, log_level: str = "INFO") -> None:
        self.config_path: Path | None = None
        if isinstance(config, str | Path):
            self.config_path = Path(config)
            self.config = WorkloadConfig.load(self.config_path)
        else:
            self.config = config if isinstance(config, WorkloadConfig) else WorkloadConfig.from_dict(config)
        self.ranks = tuple(ranks) if ranks is not None else self.config.layout.ranks
        for r in self.ranks:
            if r not in self.config.layout.ranks:
                raise WorkloadError(f"{r} is not a rank of the configuration")
        self.popen_factory, self.python, self.log_level = popen_factory, python, log_level
        self.ready_timeout_s = ready_timeout_s or self.config.start_timeout_s + 15.0
        self.op_timeout_s = op_timeout_s
        self._workdir = Path(workdir) if workdir is not None else None
        self._tmpdir: Path | None = None
        self._workers: dict[int, _Worker] = {}
        self._events: queue.Queue[tuple[int, str | None]] = queue.Queue()
        self._seq = 0
        self._closed = False

    def pids(self) -> dict[str, int]:
        """The running workers' process ids, by rank (``rank3``): what a CPU sampler reads."""
        return {f"rank{r}": w.proc.pid for r, w in self._workers.items() if w.proc.poll() is None}

    # ------------------------------------------------------------ start

    def start(self) -> WorkerGroup:
        """Start every worker and wait for all READY lines; on failure stop them all and raise
        WorkerStartError naming the ranks that did not start, with their stderr."""
        if self._workers:
            return self
        try:
            if self.config_path is None:
                workdir = self._workdir
                if workdir is None:
                    workdir = self._tmpdir = Path(tempfile.mkdtemp(prefix="mlfabric-workers-"))
                self.config_path = self.config.dump(workdir / "workers.json")
            for r in self.ranks:
                argv = worker_argv(self.config_path, r.rank, python=self.python, log_level=self.log_level)
                self._workers[r.rank] = _Worker(r, self.popen_factory(r, argv), self._events)
            self._wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def _wait_ready(self) -> None:
        pending, exited = set(self._workers), set[int]()
        deadline = time.monotonic() + self.ready_timeout_s
        while pending and (left := deadline - time.monotonic()) > 0:
            try:
                rank, line = self._events.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                self._workers[rank].eof = True
                if not exited:  # the others' ends follow within moments: name the first few
                    deadline = min(deadline, time.monotonic() + 1.0)
                exited.add(rank)
            elif parse_ready(line) == rank:
                pending.discard(rank)
                self._workers[rank].ready = True
            else:
                log.warning("rank %d before READY: %s", rank, line)
        if pending:
            why = "exited before READY" if exited else f"no READY within {self.ready_timeout_s:g} s"
            shown = sorted(exited or pending)
            details = "\n  ".join(self._workers[k].describe() for k in shown[:START_FAILURES_SHOWN])
            if len(shown) > START_FAILURES_SHOWN:
                details += f"\n  ... and {len(shown) - START_FAILURES_SHOWN} more: ranks {rank_ranges(shown)}"
            others = sorted(pending - exited)
            more = f"\n  (also not ready yet: ranks {rank_ranges(others)})" if exited and others else ""
            raise WorkerStartError(f"workers did not start ({why}):\n  {details}{more}")
        log.info("%d workers ready", len(self._workers))

    # ------------------------------------------------------------ commands

    def run(self, command: Mapping[str, Any], *, timeout: float | None = None,
            check: bool = False) -> list[dict[str, Any]]:
        """Send ``command`` to every worker and return their result lines, by rank.

        A worker that died, or gave no result within ``timeout`` seconds (default
        ``op_timeout_s``), gets a result made here: ``ok`` false, the error saying so and
        ``"reported_by": "driver"``. With ``check``, raise WorkloadError unless all are ok.
        Raises CommandError for a malformed command (nothing is sent).
        """
        if not self._workers or self._closed:
            raise WorkloadError("the worker group is not running (use start() or a with block)")
        cmd = parse_command(command)
        if cmd.op == "quit":
            raise CommandError("quit: use close() to stop the workers")
        self._seq += 1
        line = json.dumps({**cmd.to_dict(), "seq": self._seq})
        results: dict[int, dict[str, Any]] = {}

        def made_here(rank: int, error: str) -> dict[str, Any]:
            return {"rank": rank, "op": cmd.op, "iter": cmd.iter, "ok": False, "error": error,
                    "seconds": 0.0, "phases": {}, "bytes": cmd.bytes, "seq": self._seq,
                    "reported_by": "driver"}

        for k, w in self._workers.items():
            if w.eof:
                results[k] = made_here(k, f"worker is gone: {w.describe()}")
                continue
            try:
                w.send(line)
            except OSError as exc:
                results[k] = made_here(k, f"cannot send the command ({exc}): {w.describe()}")
        wait = self.op_timeout_s if timeout is None else timeout
        deadline = time.monotonic() + wait
        while len(results) < len(self._workers) and (left := deadline - time.monotonic()) > 0:
            try:
                rank, text = self._events.get(timeout=left)
            except queue.Empty:
                break
            if text is None:
                self._workers[rank].eof = True
                if rank not in results:
                    results[rank] = made_here(rank, f"worker died: {self._workers[rank].describe()}")
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError:
                log.warning("rank %d: not a result line: %s", rank, text)
                continue
            if not isinstance(obj, dict) or obj.get("rank") != rank or obj.get("seq") != self._seq:
                log.warning("rank %d: stale or foreign line dropped: %s", rank, text[:200])
                continue
            results[rank] = obj
        for k in self._workers:
            if k not in results:
                results[k] = made_here(k, f"no result within {wait:g} s: {self._workers[k].describe()}")
        out = [results[k] for k in sorted(results)]
        if check and not all(r["ok"] for r in out):
            bad = "; ".join(f"rank {r['rank']}: {r['error']}" for r in out if not r["ok"])
            raise WorkloadError(f"{cmd.op} iter {cmd.iter} failed: {bad}")
        return out

    # ------------------------------------------------------------ teardown

    def close(self, grace_s: float = 5.0) -> dict[int, int | None]:
        """Send quit, wait up to ``grace_s``, then terminate and kill; the exit codes by rank.
        Workers that never became ready are terminated at once. Safe to call twice."""
        if not self._closed:
            self._closed = True
            for w in self._workers.values():
                if w.proc.poll() is None and not w.ready:
                    w.proc.terminate()
                elif w.proc.poll() is None:
                    try:
                        w.send('{"op": "quit"}')
                    except OSError as exc:
                        log.debug("rank %d: cannot send quit: %s", w.rank.rank, exc)
            for w in self._workers.values():
                try:
                    assert w.proc.stdin is not None
                    w.proc.stdin.close()
                except OSError as exc:
                    log.debug("rank %d: closing stdin: %s", w.rank.rank, exc)
            deadline = time.monotonic() + grace_s
            for w in self._workers.values():
                _stop(w.proc, max(0.0, deadline - time.monotonic()))
            for w in self._workers.values():
                for t in w.threads:
                    t.join(timeout=2.0)
            if self._tmpdir is not None:
                shutil.rmtree(self._tmpdir, ignore_errors=True)
        return self.returncodes

    def kill(self, rank: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the worker of ``rank`` (a failure experiment's crash)."""
        self._workers[rank].proc.send_signal(sig)

    @property
    def returncodes(self) -> dict[int, int | None]:
        return {k: w.proc.poll() for k, w in self._workers.items()}

    def stderr(self, rank: int) -> str:
        """The last lines the worker of ``rank`` wrote on stderr."""
        return "\n".join(self._workers[rank].stderr_tail)

    def __enter__(self) -> WorkerGroup:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stop(proc: subprocess.Popen[Any], grace_s: float) -> None:
    """Wait for ``proc``, then SIGTERM, then SIGKILL."""
    try:
        proc.wait(timeout=grace_s)
        return
    except subprocess.TimeoutExpired:  # with no grace left (a failed start), no news
        (log.warning if grace_s > 0 else log.debug)("pid %d did not quit within %.1f s: terminating",
                                                     proc.pid, grace_s)
    proc.terminate()
    try:
        proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5.0)
