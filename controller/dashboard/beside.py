"""``--dashboard`` on ``fabric up`` and ``experiment run``: the dashboard served from the same
process while the fabric or the experiment runs, recording an experiment's run into its results
folder, and its own CPU use for the run's fidelity lines.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator, Sequence

from controller.errors import ConfigError

__all__ = ["DEFAULT_PORT", "add_dashboard_options", "dashboard_beside", "own_use_line"]

DEFAULT_PORT = 8765

_running: list[object] = []  # the LiveSampler of a dashboard served beside a run in this process


def add_dashboard_options(p: argparse.ArgumentParser) -> None:
    """``--dashboard``, ``--dashboard-port`` and ``--dashboard-listen``."""
    p.add_argument("--dashboard", action="store_true",
                   help="serve the live dashboard while this runs (its URL is printed; an experiment's samples are "
                        "kept in its results folder for mlfabric dashboard --replay)")
    p.add_argument("--dashboard-port", type=int, default=DEFAULT_PORT, help="the dashboard's TCP port (0: any free one)")
    p.add_argument("--dashboard-listen", default="127.0.0.1",
                   help="the dashboard's address (another one shows the fabric's names and rates to whoever reaches "
                        "the port)")


def _wanted(argv: Sequence[str]) -> argparse.Namespace:
    pre = argparse.ArgumentParser(add_help=False)
    add_dashboard_options(pre)
    return pre.parse_known_args(list(argv))[0]


@contextlib.contextmanager
def dashboard_beside(argv: Sequence[str], what: str) -> Iterator[None]:
    """Serves the dashboard around the block when ``argv`` asks for it (``--dashboard``);
    a port it cannot take is refused in one line before anything starts."""
    args = _wanted(argv)
    if not args.dashboard:
        yield
        return
    from controller.dashboard.live import LiveSampler
    from controller.dashboard.server import Dashboard

    if not 0 <= args.dashboard_port <= 65535:
        raise ConfigError(what, "--dashboard-port", args.dashboard_port, "a TCP port, 0-65535 (0: any free one)")
    sampler = LiveSampler(record=True)
    try:
        board = Dashboard(sampler, host=args.dashboard_listen, port=args.dashboard_port)
    except OSError as exc:
        raise ConfigError(what, "--dashboard-port", f"{args.dashboard_listen}:{args.dashboard_port}",
                          f"cannot listen there: {exc.strerror or exc}") from None
    with board:
        print(f"dashboard: {board.url}", flush=True)
        _running.append(sampler)
        try:
            yield
        finally:
            _running.remove(sampler)


def own_use_line() -> str | None:
    """What the dashboard served beside this run used of the machine (None: none is served)."""
    if not _running:
        return None
    sampler = _running[-1]
    cpu, wall = getattr(sampler, "cpu_seconds", 0.0), getattr(sampler, "wall_seconds", 0.0)
    if wall <= 0:
        return None
    return (f"dashboard: its sampler used {cpu:.2f} CPU-s over {wall:.0f} s ({100 * cpu / wall:.2f}% of a core), "
            "counted in the machine's CPU above")
