"""A switch process stopped by SIGTERM or SIGINT ends its controllers' StreamChannels the way
a dying simple_switch_grpc does: with UNAVAILABLE (simple_switch_grpc dies of the signal
and its connections close), never with OK, which controllers take for a deliberate end of
the stream (finsy logs "Switch task failed" and a traceback before it reconnects)."""

from __future__ import annotations

import os
import queue
import signal

import grpc
import pytest
from google.rpc import code_pb2

from controller.readiness import free_tcp_port
from controller.switch_process import SwitchProcess, SwitchSpec
from pybmv2.runtime.testing import StreamClient

#: seconds for what takes milliseconds; reached only if the switch hangs
STUCK = 20.0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_streams_end_unavailable_when_the_switch_is_stopped(target_name: str, signum: signal.Signals,
                                                            switch_engine: str | None) -> None:
    spec = SwitchSpec(name=f"shutdown-{target_name}", target=target_name, ports={},
                      grpc_address=f"127.0.0.1:{free_tcp_port()}", engine=switch_engine)
    with SwitchProcess(spec) as switch:
        primary = StreamClient(spec.grpc_address, spec.device_id, election_id=10)
        backup = StreamClient(spec.grpc_address, spec.device_id, election_id=5)
        try:
            assert primary.arbitrate().status.code == code_pb2.OK
            assert backup.arbitrate().status.code == code_pb2.ALREADY_EXISTS
            assert switch.proc is not None
            os.killpg(switch.proc.pid, signum)
            for client in (primary, backup):
                while True:
                    try:
                        if client.responses.get(timeout=STUCK) is None:  # the stream ended
                            break
                    except queue.Empty:
                        pytest.fail(f"the stream was still open {STUCK} s after {signum.name}")
                assert client.stream_error is not None, "the stream ended with OK"
                assert client.stream_error.code() == grpc.StatusCode.UNAVAILABLE
            switch.proc.wait(timeout=STUCK)
        finally:
            primary.close()
            backup.close()
