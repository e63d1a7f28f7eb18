"""``mlfabric launch`` refuses bad input in one line before any fabric starts, and runs
``python`` with the interpreter it runs under (as torchrun does)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from controller.errors import ConfigError
from controller.launch.command import resolve_command

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["python", "python3", "python3.11"])
def test_python_is_the_interpreter_mlfabric_runs_under(name: str) -> None:
    assert resolve_command([name, "-m", "job"]) == [sys.executable, "-m", "job"]


def test_a_python_that_cannot_import_mpi4py_is_refused_for_mpi(tmp_path: Path) -> None:
    # a bare interpreter of its own: a venv without mpi4py
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    bare = tmp_path / "v" / "bin" / "python3"
    with pytest.raises(ConfigError, match=r"cannot import mpi4py .*No module named 'mpi4py'"):
        resolve_command([str(bare), "-m", "workloads.mpi_collectives"], mpi=True)
    assert resolve_command([str(bare), "job.py"]) == [str(bare), "job.py"]  # plain launch: nothing to import


@pytest.mark.parametrize(("args", "message"), [
    (["--hosts", "s9"], "--hosts: not hosts of rail-only-4x4"),
    (["--master-port", "0"], "--master-port: a TCP port"),
    (["--ranks-per-host", "100000"], "--ranks-per-host: at most 512"),
])
def test_bad_placement_is_refused_before_a_fabric_comes_up(args: list[str], message: str) -> None:
    out = subprocess.run([sys.executable, "-m", "controller.cli", "launch", "topologies/rail-only-4x4.yaml", *args,
                          "--", "hostname"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and message in out.stderr
    assert out.stderr.count("\n") == 1 and "brought up" not in out.stderr, out.stderr
