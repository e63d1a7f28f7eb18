"""The job's command as ``mlfabric launch`` runs it: ``python``/``python3`` is the interpreter
``mlfabric`` runs under (as torchrun does: the project's environment, with mpi4py and torch),
anything else what ``PATH`` finds; and a Python command that cannot import what ``--mpi`` or
``--torch`` need is refused in one line before any rank starts."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence

from controller.errors import ConfigError

__all__ = ["MAX_RANKS_PER_HOST", "needed_modules", "resolve_command"]

#: the most ranks ``--ranks-per-host`` may start on one host (a 64-GPU server's worth, 8 times)
MAX_RANKS_PER_HOST = 512
_SOURCE = "<launch>"
_PYTHON = re.compile(r"python(3(\.\d+)?)?")


def needed_modules(*, mpi: bool, torch: bool) -> tuple[str, ...]:
    """What a Python job must import under the chosen launcher.

    >>> needed_modules(mpi=True, torch=False), needed_modules(mpi=False, torch=False)
    (('mpi4py',), ())
    """
    return (("mpi4py",) if mpi else ()) + (("torch",) if torch else ())


def resolve_command(command: Sequence[str], *, mpi: bool = False, torch: bool = False,
                    interpreter: str = sys.executable) -> list[str]:
    """``command`` with its program made absolute: ``python``, ``python3`` and ``python3.X``
    become ``interpreter``; a Python program must import :func:`needed_modules`.

    >>> resolve_command(["python3", "-m", "job"], interpreter="/venv/bin/python")
    ['/venv/bin/python', '-m', 'job']
    >>> resolve_command(["no-such-program-here"])
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: <launch>: CMD: not found on PATH (got 'no-such-program-here')
    """
    if not command:
        raise ConfigError(_SOURCE, "CMD", None, "give the job's command after --, e.g. -- python my_job.py")
    if _PYTHON.fullmatch(command[0]):
        program = interpreter
    else:
        found = shutil.which(command[0])
        if found is None:
            raise ConfigError(_SOURCE, "CMD", command[0], "not found on PATH")
        program = found
    modules = needed_modules(mpi=mpi, torch=torch)
    if modules and _PYTHON.fullmatch(os.path.basename(program)):
        probe = subprocess.run([program, "-c", f"import {', '.join(modules)}"], capture_output=True, text=True,
                               timeout=120, check=False)
        if probe.returncode:
            missing = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else f"exit {probe.returncode}"
            raise ConfigError(_SOURCE, "CMD", program,
                              f"cannot import {', '.join(modules)} ({missing}): run the job with python "
                              f"(the interpreter mlfabric runs under) or install them for this one")
    return [program, *command[1:]]
