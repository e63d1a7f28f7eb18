"""The dashboard's readings on one machine of a fabric across machines:
``python -m controller.dashboard.machine_counters``, started over SSH on each machine by
:class:`~controller.dashboard.cluster_readings.MachineReaders`. For each request line (JSON: the
interfaces and switch processes of this machine) it answers one line with what
:class:`~controller.dashboard.live.LiveSampler` reads on one machine: each interface's byte
counters and drops, each process's CPU seconds and each port's queue. It ends with its input.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping
from typing import IO, Any

from controller.dashboard.live import read_counters
from controller.dashboard.switches import QueueReader, read_cpu_seconds, read_port_drops

__all__ = ["answer", "main"]


def answer(request: Mapping[str, Any], queues: QueueReader) -> dict[str, Any]:
    """The readings a request asks for (``interfaces``: names; ``pids``: name -> pid).

    >>> out = answer({"interfaces": ["lo"], "pids": {}}, QueueReader())
    >>> sorted(out), "lo" in out["counters"]
    (['counters', 'cpu', 'drops', 'queues'], True)
    """
    names = [str(n) for n in request.get("interfaces", [])]
    wanted = set(names)
    return {"counters": read_counters(names), "drops": read_port_drops(names),
            "cpu": read_cpu_seconds({str(k): int(v) for k, v in (request.get("pids") or {}).items()}),
            "queues": {k: dataclasses.asdict(q) for k, q in queues.read().items() if k in wanted}}


def serve(requests: IO[str], out: IO[str]) -> None:
    queues = QueueReader()
    try:
        for line in requests:
            if line.strip():
                out.write(json.dumps(answer(json.loads(line), queues)) + "\n")
                out.flush()
    finally:
        queues.close()


def main() -> int:
    serve(sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
