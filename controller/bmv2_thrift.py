"""BMv2's Thrift side: a Thrift port per switch, and simple_switch_CLI run from this environment.

``simple_switch_CLI`` (the p4lang tutorials' and p4-utils' way into a running switch) talks
Thrift to ``simple_switch_grpc --thrift-port N``. Two things stand in its way on a machine
like this one, and both are told apart here with a one-line reason:

- the switch: ``simple_switch_grpc`` serves Thrift only when it was configured
  ``--with-thrift``; otherwise it ignores ``--thrift-port`` with a warning in its log;
- the CLI: ``/usr/local/bin/simple_switch_CLI`` is a Python script run by whatever
  ``python3`` is first on PATH. It imports ``sswitch_CLI``/``bmpy_utils`` (installed by BMv2
  into ``<prefix>/lib/python3.X/site-packages``, which the script adds to its path) and the
  ``thrift`` package, which BMv2 does not install. This environment has ``thrift`` (a
  dependency of mlfabric), so the script is run with this interpreter.

The Python target has no Thrift server at all: use P4Runtime (``mlfabric shell``).
"""

from __future__ import annotations

import importlib.util
import mmap
import os
import re
import shutil
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from controller.errors import EmulationError, ToolchainMissing

__all__ = ["THRIFT_BASE_PORT", "CliCommand", "assign_thrift_ports", "port_free", "simple_switch_cli",
           "thrift_support"]

#: BMv2's default Thrift port; a fabric's switches get 9090, 9091... (skipping busy ones)
THRIFT_BASE_PORT = 9090
#: a namespace of the simple_switch Thrift service: in the binary exactly when it was built with Thrift
_THRIFT_MARKER = b"sswitch_runtime"


def port_free(port: int) -> bool:
    """Nothing listens on, or holds, TCP ``port`` on any address (BMv2's Thrift server binds
    them all)."""
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def assign_thrift_ports(names: Sequence[str], *, base: int = THRIFT_BASE_PORT,
                        is_free: Callable[[int], bool] = port_free) -> dict[str, int]:
    """A distinct Thrift port per switch, in order from ``base``, skipping ports in use.

    >>> assign_thrift_ports(["rail0", "rail1", "spine0"], is_free=lambda p: p != 9091)
    {'rail0': 9090, 'rail1': 9092, 'spine0': 9093}
    """
    out: dict[str, int] = {}
    port = base
    for name in names:
        while port <= 65535 and not is_free(port):
            port += 1
        if port > 65535:
            raise EmulationError(f"no free TCP port from {base} up for switch {name}'s Thrift server")
        out[name] = port
        port += 1
    return out


def thrift_support(exe: str | os.PathLike[str] | None = None) -> tuple[bool, str]:
    """Whether ``simple_switch_grpc`` (``exe``, default: the one on PATH) serves Thrift, and a
    sentence saying why not when it does not."""
    path = exe or shutil.which("simple_switch_grpc")
    if path is None:
        return False, "simple_switch_grpc is not installed"
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            built_with = data.find(_THRIFT_MARKER) >= 0
    except (OSError, ValueError) as exc:
        return False, f"cannot read {path}: {exc}"
    if not built_with:
        return False, (f"{path} was built without Thrift (BMv2's simple_switch_grpc needs configure "
                       "--with-thrift), so simple_switch_CLI cannot reach it: use `mlfabric shell SWITCH` (P4Runtime)")
    return True, ""


@dataclass(frozen=True, slots=True)
class CliCommand:
    """How to run simple_switch_CLI from this environment: its argv and extra PYTHONPATH."""

    argv: tuple[str, ...]
    pythonpath: str

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (self.pythonpath, env.get("PYTHONPATH", "")) if p)
        return env


def _module_dir(script: Path) -> Path | None:
    """Where the script's modules are: the folder it appends to sys.path, else
    ``<prefix>/lib/python3*/site-packages`` beside its ``bin/``."""
    try:
        text = script.read_text(errors="replace")
    except OSError:
        return None
    named = [Path(m) for m in re.findall(r"sys\.path\.append\(\s*['\"]([^'\"]+)['\"]", text)]
    candidates = [*named, *sorted(script.resolve().parent.parent.glob("lib/python3*/site-packages"))]
    return next((d for d in candidates if (d / "sswitch_CLI.py").exists()), None)


def simple_switch_cli(thrift_port: int, args: Sequence[str] = (), *, thrift_ip: str = "127.0.0.1",
                      script: str | None = None) -> CliCommand:
    """The command that runs simple_switch_CLI against ``thrift_ip:thrift_port``, or
    ToolchainMissing saying in one line what is missing."""
    found = script or shutil.which("simple_switch_CLI") or shutil.which("simple_switch_CLI", path="/usr/local/bin")
    if found is None:
        raise ToolchainMissing("simple_switch_CLI is not installed (it comes with BMv2)")
    path = Path(found)
    modules = _module_dir(path)
    if modules is None:
        raise ToolchainMissing(f"{path}: BMv2's Python modules (sswitch_CLI.py, bmpy_utils.py) are not installed "
                               "beside it")
    try:
        has_thrift = importlib.util.find_spec("thrift") is not None
    except (ImportError, ValueError):
        has_thrift = False
    if not has_thrift:
        raise ToolchainMissing(f"simple_switch_CLI needs the Python package thrift, missing from {sys.prefix}: "
                               "make setup (or pip install thrift) installs it")
    return CliCommand((sys.executable, str(path), "--thrift-ip", thrift_ip, "--thrift-port", str(thrift_port),
                       *args), str(modules))
