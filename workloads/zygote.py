"""A job's workers forked from one process that imported them once.

A worker imports numpy and the project's collectives: 19 MB of private memory and ~0.15 s
of CPU each, so a 1,024-GPU job's workers would need 19 GB and over a minute of both cores
just to start. This process imports the worker once, freezes what it imported out of the
garbage collector's way (so that a child's collections do not copy those pages) and forks
one worker per rank, each on the pipes the driver made for it (:mod:`workloads.forked`)
and in its server's network namespace::

    python -m workloads.zygote --config JOB.json --log-level INFO --rank 8:5:6:7:/proc/4242/ns/net ...

``--rank RANK:IN:OUT:ERR[:NETNS]`` gives a rank, the inherited descriptors of its stdin,
stdout and stderr, and the network namespace the worker enters (a Mininet host's is
``/proc/<its pid>/ns/net``; without one the worker stays in this process's). On its own stdout this process writes ``forked RANK PID`` for each worker and
``exit RANK CODE`` (Popen's convention: -N for signal N) as each one ends, then exits 0. It
forwards SIGTERM and SIGINT to the workers, and terminates them if its stdin closes (the
driver is gone).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import os
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["RankPipes", "main", "parse_rank"]

#: numpy's BLAS must not start a thread pool before the fork (a child would inherit its
#: locks without its threads); the workers' arithmetic is element-wise anyway
SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@dataclass(frozen=True)
class RankPipes:
    """A rank, the descriptors of its stdin, stdout and stderr, and its network namespace
    ("": this process's)."""

    rank: int
    stdin: int
    stdout: int
    stderr: int
    netns: str = ""


def parse_rank(text: str) -> RankPipes:
    """``RANK:IN:OUT:ERR[:NETNS]``.

    >>> parse_rank("9:8:9:10")
    RankPipes(rank=9, stdin=8, stdout=9, stderr=10, netns='')
    >>> parse_rank("9:8:9:10:/proc/4242/ns/net").netns
    '/proc/4242/ns/net'
    """
    fields = text.split(":", 4)
    try:
        rank, fd_in, fd_out, fd_err = (int(x) for x in fields[:4])
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected RANK:IN:OUT:ERR[:NETNS], four integers first") from None
    if rank < 0 or min(fd_in, fd_out, fd_err) < 3:
        raise argparse.ArgumentTypeError(f"{text!r}: a rank >= 0 and descriptors >= 3")
    return RankPipes(rank, fd_in, fd_out, fd_err, fields[4] if len(fields) == 5 else "")


#: setns(2)'s flag for a network namespace
CLONE_NEWNET = 0x40000000


def enter_netns(path: str) -> None:
    """Move this (single-threaded) process into the network namespace at ``path``."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot enter the network namespace {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def _child(pipes: RankPipes, every_fd: set[int], worker_argv: list[str], nice: int) -> None:
    """In the forked worker: its pipes as 0, 1, 2, its niceness, then the worker; never returns."""
    code = 1
    try:
        if pipes.netns:
            enter_netns(pipes.netns)
        if nice:
            os.nice(nice)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.dup2(pipes.stdin, 0)
        os.dup2(pipes.stdout, 1)
        os.dup2(pipes.stderr, 2)
        for fd in every_fd:
            with contextlib.suppress(OSError):
                os.close(fd)
        from workloads import worker

        code = worker.main(worker_argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # a worker's crash is reported on its stderr, not raised in the zygote
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.zygote", description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, help="the job's JSON configuration file")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.add_argument("--rank", dest="ranks", action="append", type=parse_rank, required=True,
                        metavar="RANK:IN:OUT:ERR", help="a worker to fork and its pipes (repeat)")
    parser.add_argument("--nice", type=int, default=0, choices=range(0, 20), metavar="0..19",
                        help="the workers' niceness (the emulated network before the emulated hosts)")
    args = parser.parse_args(argv)
    for name, value in SINGLE_THREADED.items():
        os.environ.setdefault(name, value)
    from workloads import worker  # noqa: F401 - imported once, shared by every fork

    every_fd = {fd for p in args.ranks for fd in (p.stdin, p.stdout, p.stderr)}
    gc.collect()
    gc.freeze()
    children: dict[int, int] = {}
    # re-entrant: a signal handler may run while the main thread holds it
    lock = threading.RLock()
    for pipes in args.ranks:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(pipes, every_fd, ["--config", args.config, "--rank", str(pipes.rank),
                                     "--log-level", args.log_level], args.nice)
        children[pid] = pipes.rank
        for fd in (pipes.stdin, pipes.stdout, pipes.stderr):
            os.close(fd)
        print(f"forked {pipes.rank} {pid}", flush=True)

    def signal_all(sig: int) -> None:
        with lock:
            for pid in list(children):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)

    signal.signal(signal.SIGTERM, lambda signum, frame: signal_all(signal.SIGTERM))
    signal.signal(signal.SIGINT, lambda signum, frame: signal_all(signal.SIGINT))

    def watch_stdin() -> None:
        with contextlib.suppress(OSError):
            while os.read(0, 4096):  # not sys.stdin: its lock would stall the interpreter's exit
                pass
        signal_all(signal.SIGTERM)  # the driver is gone

    threading.Thread(target=watch_stdin, name="driver-watch", daemon=True).start()
    while True:
        with lock:
            if not children:
                break
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
            continue
        with lock:
            rank = children.pop(pid, None)
        if rank is not None:
            print(f"exit {rank} {os.waitstatus_to_exitcode(status)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
