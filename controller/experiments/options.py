"""The command-line options every experiment runner shares, worded once."""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.dashboard.beside import add_dashboard_options

__all__ = ["UNDECIDED_EXIT", "DefaultsFormatter", "add_common_options", "add_data_path_options", "experiment_parser"]

#: the exit status of a run asked to decide (``--require-decided``) that could not
UNDECIDED_EXIT = 3


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: X)`` to an option's help, except where there is nothing to say
    (no default, a flag that is off, or a help text that already names its default)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def experiment_parser(name: str, description: str | None) -> argparse.ArgumentParser:
    """The parser of ``mlfabric experiment run NAME``; the runner adds its own options."""
    return argparse.ArgumentParser(prog=f"mlfabric experiment run {name}",
                                   description=(description or "").split("\n")[0] or None,
                                   formatter_class=DefaultsFormatter)


def add_common_options(p: argparse.ArgumentParser, name: str, *, repetitions: int | None = None) -> None:
    """``--target``, ``--engine``, ``--out``, ``--require-decided`` and (when the experiment
    repeats runs) ``--repetitions``."""
    p.add_argument("--target", choices=("python", "bmv2"), default="python",
                   help="switch target: the project's Python switch or BMv2 simple_switch_grpc")
    p.add_argument("--engine", choices=("auto", "native", "python"), default=None,
                   help="the Python target's packet engine (mlfabric-switch --engine; default: auto)")
    if repetitions is not None:
        p.add_argument("--repetitions", type=int, default=repetitions,
                       help="independent runs of everything; figures are mean ± sd over them")
    p.add_argument("--out", type=Path, default=None, help=f"results folder (default: results/{name}-<time>)")
    add_dashboard_options(p)
    p.add_argument("--require-decided", action="store_true",
                   help="exit with status 3 when a comparison is undecided: a fidelity monitor (the machine's "
                        "or a switch's CPU) failed while it was measured")


def add_data_path_options(p: argparse.ArgumentParser, *, super_frames: int = 0, nvlink: bool = True) -> None:
    """``--nvlink`` (with ``nvlink``: experiments whose servers hold several GPUs) and
    ``--super-frames``: how the experiment's bytes move (its workers' intra-server link, and
    TCP super-packets through the switches)."""
    from controller.experiments.rail_only import MAX_SUPER_FRAMES, NVLINK_KINDS

    if nvlink:
        p.add_argument("--nvlink", choices=NVLINK_KINDS, default="unix",
                       help="how a server's GPUs talk: unix (Unix sockets, each GPU's NVLink egress and ingress paced "
                            "to the NVLink rate; the emulated network carries only the network's bytes) or loopback "
                            "(TCP over the host's loopback shaped to rails x the NVLink rate, as before)")
    p.add_argument("--super-frames", type=int, default=super_frames, choices=range(MAX_SUPER_FRAMES + 1),
                   metavar=f"0..{MAX_SUPER_FRAMES}",
                   help="frames per TCP super-packet: the hosts' offloads stay on and the switches forward segments "
                        "of this many frames whole (mlfabric-switch --super-packets, Python target); 0 sends every "
                        "frame on its own")
