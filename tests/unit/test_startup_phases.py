"""A switch process logs where its start-up went, once, when its first pipeline commits:
the phases a user reads in the switch's log and ``make bench`` prints."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2

from pybmv2.daemon import DaemonOptions, SwitchDaemon
from pybmv2.native.build import compiler
from pybmv2.runtime.testing import load_config
from pybmv2.startup import LOG_PREFIX, StartupPhases

BUILD = Path(__file__).parents[2] / "p4src" / "build"
COMMIT = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
NATIVE = ["native: cache look-up", "native: C generation", "native: C compiler", "native: dlopen",
          "native: table push"]


@pytest.mark.parametrize("engine", ["python", "native"])
def test_the_first_pipeline_logs_the_start_up_phases(engine: str, tmp_path, monkeypatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    if engine == "native" and compiler() is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("MLFABRIC_NATIVE_CACHE", str(tmp_path))
    daemon = SwitchDaemon(DaemonOptions(grpc_addr="127.0.0.1:0", engine=engine),
                          startup=StartupPhases())
    config = load_config(BUILD / "rail_switch.p4info.txtpb", BUILD / "rail_switch.json")
    try:
        with caplog.at_level(logging.INFO, logger="pybmv2.runtime.device"):
            daemon.server.device.set_pipeline(COMMIT, config)
            daemon.server.device.set_pipeline(COMMIT, config)  # not start-up any more
    finally:
        daemon.close()
    assert caplog.text.count(LOG_PREFIX) == 1
    phases = StartupPhases.parse(caplog.text)
    assert phases is not None and all(ms >= 0 for ms in phases.values())
    names = list(phases)
    assert names[0] == "P4Runtime server and native engine imports"
    assert names[1:4] == ["controller: connect, arbitrate, send the pipeline",
                          "BMv2 JSON to the Python engine's program", "P4Info: index and binding"]
    assert [n for n in names if n.startswith("native:")] == (NATIVE if engine == "native" else [])
    assert names[-1] == "commit: the rest"


def test_the_process_start_is_before_now() -> None:
    import time

    from pybmv2.startup import process_start

    assert process_start() <= time.monotonic()
