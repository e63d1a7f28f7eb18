"""gRPC's transport as the project's processes run it: set before grpc is imported.

grpcio's Python processes default to its EventEngine for listeners and connections. On
the 2-core VMs measured here that cost ~40% more CPU per RPC (a trivial unary RPC: server
393 -> 287 us, client 250 -> 145 us, grpcio 1.85.3), mostly in thread hand-offs: the
switch process and the controller both turn it off through ``GRPC_EXPERIMENTS``
(:func:`tune_grpc`), for the grpcio versions it was measured with. A ``GRPC_EXPERIMENTS``
the user set is left alone, and so is a process that imported grpc already.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from collections.abc import Container, MutableMapping

__all__ = ["TESTED_GRPCIO", "TUNED_EXPERIMENTS", "tune_grpc"]

#: the experiments turned off (grpc/src/core/lib/experiments/experiments.yaml names them)
TUNED_EXPERIMENTS = "-event_engine_listener,-event_engine_client,-event_engine_for_all_other_endpoints"
#: grpcio (major, minor) versions from which on, and before which, they were measured
TESTED_GRPCIO = ((1, 80), (1, 90))


def _grpcio_version() -> tuple[int, int] | None:
    try:
        major, minor = importlib.metadata.version("grpcio").split(".")[:2]
        return int(major), int(minor)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def tune_grpc(environ: MutableMapping[str, str] = os.environ,
              modules: Container[str] = sys.modules) -> str | None:
    """Set ``GRPC_EXPERIMENTS`` for this process and its children; what was set, or None
    when nothing was (set by the user, grpc imported already, an untested grpcio)."""
    if "GRPC_EXPERIMENTS" in environ or "grpc" in modules:
        return None
    version = _grpcio_version()
    low, high = TESTED_GRPCIO
    if version is None or not low <= version < high:
        return None
    environ["GRPC_EXPERIMENTS"] = TUNED_EXPERIMENTS
    return TUNED_EXPERIMENTS
