"""A worker process: one GPU of one server, driven through its stdin and stdout.

Run inside the server's network namespace::

    python -m workloads.worker --config CONFIG_JSON_PATH --rank K [--log-level INFO]

It connects the mesh (:class:`~workloads.transport.Mesh`), prints ``READY K`` and then runs
the commands of :mod:`workloads.protocol` it reads on stdin, one result line each, until
``quit`` (exit 0) or the end of stdin (exit 0, with a warning). If it cannot start (bad
configuration, address not available, peers unreachable) it writes why on stderr and exits
2 (configuration) or 1 (mesh). Logs go to stderr; stdout carries only protocol lines.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from workloads.config import WorkloadConfig
from workloads.errors import CommandError, ConfigError, WorkloadError
from workloads.ops import Executor
from workloads.protocol import error_result, parse_command, ready_line
from workloads.transport import Mesh

__all__ = ["keep_freed_memory", "main", "serve"]

log = logging.getLogger(__name__)


def _emit(out: TextIO, line: str) -> None:
    out.write(line + "\n")
    out.flush()


def _raw(line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None


def serve(mesh: Mesh, stdin: TextIO, stdout: TextIO) -> int:
    """Run commands from ``stdin`` until quit or end of input; the process's exit status."""
    executor, rank = Executor(mesh), mesh.me.rank
    try:
        return _serve(executor, rank, stdin, stdout)
    finally:
        executor.close()


def _serve(executor: Executor, rank: int, stdin: TextIO, stdout: TextIO) -> int:
    for line in stdin:
        if not line.strip():
            continue
        try:
            cmd = parse_command(line)
        except CommandError as exc:
            log.error("bad command %r: %s", line.strip()[:200], exc)
            _emit(stdout, json.dumps(error_result(rank, _raw(line), f"bad command: {exc}")))
            continue
        if cmd.op == "quit":
            log.info("quit")
            return 0
        log.debug("running %s", cmd)
        result = executor.execute(cmd)
        if not result["ok"]:
            log.error("%s iter %s failed: %s", cmd.op, cmd.iter, result["error"])
        _emit(stdout, json.dumps(result))
    log.warning("stdin closed without a quit command: exiting")
    return 0


#: glibc's mallopt parameters: keep what is freed up to this size in the heap (no munmap)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: glibc's largest mmap threshold on 64-bit machines
_MMAP_THRESHOLD_MAX = 32 << 20


def keep_freed_memory() -> bool:
    """Make glibc reuse freed buffers instead of returning them to the kernel: a worker
    allocates the same few multi-MB buffers command after command, and each fresh mapping
    costs page faults and zeroed pages (huge pages: 2 MB zeroed per fault). Measured on
    make run's workload at 100 Mbit/s: the zeroing alone was 9% of the machine's CPU.
    Whether glibc took it (False elsewhere: musl, or no libc to ask)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)) and \
            bool(libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30))
    except (OSError, AttributeError):
        return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.worker", description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, help="the job's JSON configuration file")
    parser.add_argument("--rank", required=True, type=int, help="this worker's rank")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level,
                        format=f"%(asctime)s worker {args.rank} %(levelname)s %(name)s: %(message)s")
    if not keep_freed_memory():
        logging.getLogger(__name__).info("glibc's mallopt is not available: buffers are mapped afresh")
    try:
        config = WorkloadConfig.load(args.config)
        if not 0 <= args.rank < config.layout.world:
            raise ConfigError(args.config, "--rank", args.rank,
                              f"not a rank of this configuration (0..{config.layout.world - 1})")
    except ConfigError as exc:
        sys.stderr.write(f"worker rank {args.rank}: cannot start: {exc}\n")
        return 2
    try:
        mesh = Mesh.start(config, args.rank)
    except WorkloadError as exc:
        sys.stderr.write(f"worker rank {args.rank}: cannot start: {exc}\n")
        return 1
    with mesh:
        _emit(sys.stdout, ready_line(args.rank))
        return serve(mesh, sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
