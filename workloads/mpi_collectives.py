"""Open MPI's collectives, timed and checked: ``MPI_Allreduce`` and ``MPI_Alltoall`` through
mpi4py, the user-facing job ``mlfabric launch --mpi`` runs in its tests and in the
collectives experiment.

Each rank fills its buffer with integers derived from its rank, so the result is exact
(float64 sums of small integers) and every rank checks its own. Rank 0 prints one JSON line
per (collective, size): the median and the slowest time over repetitions (the slowest rank
of each repetition), the result check, and which rank sent on which NIC.

Run it under Open MPI: ``mlfabric launch --mpi TOPOLOGY -- python3 -m workloads.mpi_collectives
--sizes-kb 64 1024``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["expected_allreduce", "expected_alltoall", "main"]


def expected_allreduce(world: int, n: int) -> np.ndarray:
    """Every rank's result of the all-reduce: the sum over ranks r of ``(r + 1) * (i % 7 + 1)``.

    >>> expected_allreduce(3, 4).tolist()
    [6.0, 12.0, 18.0, 24.0]
    """
    return (world * (world + 1) / 2) * (np.arange(n) % 7 + 1).astype(np.float64)


def expected_alltoall(rank: int, world: int, per_peer: int) -> np.ndarray:
    """What ``rank`` receives: from each peer p, ``per_peer`` values ``p * 1000 + rank``.

    >>> expected_alltoall(1, 2, 2).tolist()
    [1.0, 1.0, 1001.0, 1001.0]
    """
    return np.repeat(np.arange(world, dtype=np.float64) * 1000 + rank, per_peer)


class Pacer:
    """Rank 0's half of a handshake with a runner measuring each (collective, size) block
    on its own: before a block it writes ``ready-N.json`` into the folder and waits for the
    runner's ``go-N``; after it, ``done-N.json`` with the block's figures."""

    def __init__(self, folder: str, poll_s: float = 0.005) -> None:
        self.folder, self.poll_s = Path(folder), poll_s

    def _write(self, name: str, payload: dict) -> None:
        tmp = self.folder / f".{name}"
        tmp.write_text(json.dumps(payload))
        tmp.rename(self.folder / name)  # whole or not at all

    def ready(self, block: int, collective: str, kb: int) -> None:
        self._write(f"ready-{block}.json", {"collective": collective, "kb": kb})
        go = self.folder / f"go-{block}"
        while not go.exists():
            time.sleep(self.poll_s)

    def done(self, block: int, result: dict) -> None:
        self._write(f"done-{block}.json", result)


def _buffers(rank: int, world: int, name: str, kb: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A rank's send buffer, its receive buffer and the result it must get."""
    n = max(world, kb * 1024 // 8)
    n -= n % world
    if name == "allreduce":
        send = (rank + 1) * (np.arange(n) % 7 + 1).astype(np.float64)
        want = expected_allreduce(world, n)
    else:
        send = np.repeat(np.arange(world, dtype=np.float64) + rank * 1000, n // world)
        want = expected_alltoall(rank, world, n // world)
    return send, np.empty_like(send), want


def _once(comm: Any, mpi: Any, name: str, send: np.ndarray, recv: np.ndarray) -> float:
    """One run after a barrier: the slowest rank's time."""
    comm.Barrier()
    t0 = time.perf_counter()
    if name == "allreduce":
        comm.Allreduce(send, recv, op=mpi.SUM)
    else:
        comm.Alltoall(send, recv)
    return float(comm.allreduce(time.perf_counter() - t0, op=mpi.MAX))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m workloads.mpi_collectives", description=__doc__.split("\n")[0])
    p.add_argument("--sizes-kb", type=int, nargs="+", default=[64, 512], help="bytes per rank's buffer, in KiB")
    p.add_argument("--repetitions", type=int, default=5, help="timed repetitions per size (after one warm-up)")
    p.add_argument("--collectives", nargs="+", choices=("allreduce", "alltoall"), default=["allreduce", "alltoall"])
    p.add_argument("--fail-rank", type=int, default=-1,
                   help="this rank dies with exit code 3 at the start, as a crash does (a test's failure)")
    p.add_argument("--pace-dir", default="",
                   help="hand-shake each (collective, size) block with a runner through this folder (Pacer)")
    p.add_argument("--per-rail", action="store_true",
                   help="each rail's ranks reduce among themselves (MPI_Comm_split by MLFABRIC_RAIL)")
    a = p.parse_args(argv)
    from mpi4py import MPI

    comm: MPI.Comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if a.fail_rank >= 0:
        if rank == a.fail_rank:  # without MPI_Finalize, as a crash: a rank that finalizes waits for the others
            print(f"rank {rank}: failing on purpose (--fail-rank)", flush=True)
            os._exit(3)
        time.sleep(120)  # the others wait without talking to it: its exit is the only failure to report
        return 0
    if a.per_rail:
        comm = comm.Split(color=int(os.environ.get("MLFABRIC_RAIL", "0")), key=rank)
        rank = comm.Get_rank()
    group = os.environ.get("MLFABRIC_RAIL", "") if a.per_rail else "all"
    pacer = Pacer(a.pace_dir) if a.pace_dir and MPI.COMM_WORLD.Get_rank() == 0 else None
    ok = True
    for block, (name, kb) in enumerate((c, k) for c in a.collectives for k in a.sizes_kb):
        send, recv, want = _buffers(rank, comm.Get_size(), name, kb)
        _once(comm, MPI, name, send, recv)  # a warm-up (the first use of a connection opens it)
        if pacer is not None:
            pacer.ready(block, name, kb)
        MPI.COMM_WORLD.Barrier()  # the other ranks wait here while rank 0 waits for the go
        times = [_once(comm, MPI, name, send, recv) for _ in range(a.repetitions)]
        exact = bool(comm.allreduce(bool(np.array_equal(recv, want)), op=MPI.LAND))
        result = {"collective": name, "bytes": int(send.nbytes), "world": comm.Get_size(), "group": group,
                  "median_s": round(statistics.median(times), 6), "max_s": round(max(times), 6),
                  "times": [round(t, 6) for t in times], "exact": exact}
        ok &= result["exact"]
        if rank == 0:
            print(json.dumps(result), flush=True)
        if pacer is not None:
            pacer.done(block, result)
    world_comm = MPI.COMM_WORLD
    where = world_comm.gather((world_comm.Get_rank(), os.environ.get("MLFABRIC_HOST", ""),
                               os.environ.get("MLFABRIC_NIC", ""), os.environ.get("MLFABRIC_RAIL", "")))
    if world_comm.Get_rank() == 0:
        print(json.dumps({"ranks": where}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
