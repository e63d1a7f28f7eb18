"""The gRPC transport settings the switch and the controller start with."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mlfabric_base import grpc_transport
from mlfabric_base.grpc_transport import TUNED_EXPERIMENTS, tune_grpc

pytestmark = pytest.mark.unit


def test_tuned_only_when_nobody_chose_and_grpc_is_not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grpc_transport, "_grpcio_version", lambda: (1, 85))
    env: dict[str, str] = {}
    assert tune_grpc(env, modules=()) == TUNED_EXPERIMENTS
    assert env == {"GRPC_EXPERIMENTS": TUNED_EXPERIMENTS}
    mine = {"GRPC_EXPERIMENTS": "-something_else"}
    assert tune_grpc(mine, modules=()) is None and mine == {"GRPC_EXPERIMENTS": "-something_else"}
    late: dict[str, str] = {}
    assert tune_grpc(late, modules=("grpc",)) is None and late == {}


@pytest.mark.parametrize("version", [(1, 51), (1, 79), (1, 90), (2, 0), None])
def test_versions_it_was_not_measured_with_are_left_alone(monkeypatch: pytest.MonkeyPatch, version) -> None:
    monkeypatch.setattr(grpc_transport, "_grpcio_version", lambda: version)
    env: dict[str, str] = {}
    assert tune_grpc(env, modules=()) is None and env == {}


def test_the_installed_grpcio_accepts_the_setting_without_a_word() -> None:
    """grpc logs an error for an experiment it does not know: none may appear."""
    if tune_grpc({}, modules=()) is None:
        pytest.skip("the installed grpcio is outside the versions the setting was measured with")
    code = ("import grpc; from p4.v1 import p4runtime_pb2_grpc as g; "
            "c = grpc.insecure_channel('127.0.0.1:9'); c.close()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"GRPC_EXPERIMENTS": TUNED_EXPERIMENTS, "PATH": "/usr/bin:/bin"}, check=True)
    assert "experiment" not in done.stderr.lower(), done.stderr
