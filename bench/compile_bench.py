"""Control-plane computation at scale: rule compilation and TotientPerms."""

from __future__ import annotations

import time
import tracemalloc

from controller.routing import compile_fabric
from controller.topology import rail_only
from controller.topology.totient import diameter, ring_strides


def rail_only_16k() -> dict[str, float]:
    """Generate and compile a 16,384-GPU rail-only fabric (2,048 servers x 8, radix 64)."""
    tracemalloc.start()
    t0 = time.perf_counter()
    topo = rail_only(2048, 8, radix=64)
    t1 = time.perf_counter()
    rules = compile_fabric(topo)
    t2 = time.perf_counter()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"generate_s": t1 - t0, "compile_s": t2 - t1, "entries": sum(len(r.rules) for r in rules.values()),
            "switches": len(topo.switches), "peak_mb": peak / 1e6}


def totient_4096() -> dict[str, float]:
    t0 = time.perf_counter()
    strides = ring_strides(4096, 8)
    dia = diameter(4096, strides)
    return {"seconds": time.perf_counter() - t0, "diameter": dia, "strides": len(strides)}
