"""Tables bigger than gRPC's default 4 MiB message: read, written and cleaned up.

The ToR of a 4-rack Opera fabric (3 circuit switches staggered by a third of a period, a
1 ms send margin: a 1 us slot grid) holds 66,000 time-flow entries per configuration
version, and both versions while a reconfiguration runs: 132,000 entries, about 6 MB read. Before
the fix, the controller's channels refused any message over 4 MiB and the Python target
answered a Read with one ReadResponse, so after such a reconfiguration the fabric could be
neither read nor reconfigured again.

On the Python target the in-process server runs with gRPC's default limits (4 MiB both
ways), so these tests also show that every Write batch the controller builds and every
ReadResponse the target sends fits them.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from p4.v1 import p4runtime_pb2

from controller.p4build import pipeline_files
from controller.reconfigure import prepare_rules
from controller.reconfigure import session as session_module
from controller.reconfigure.session import LiveSwitch
from controller.schedule import opera
from controller.topology import optical
from packettest.targets import PacketTarget, open_target
from pybmv2.runtime.read_chunks import MAX_RESPONSE_BYTES, entity_frames
from pybmv2.runtime.server import ServerOptions

GRPC_DEFAULT_LIMIT = 4 * 1024 * 1024
OPERA = opera(4, uplinks=3, slice_us=10_000, night_us=1_000)
MARGIN_US = 1_000
TOPOLOGY = optical(4, 1, uplinks=3, rate_mbps=None)
TOR = TOPOLOGY.switch("tor0")


def _timeflow(version: int) -> list:
    """tor0's time-flow entries of the Opera schedule under ``version`` (66,000)."""
    rules = prepare_rules(TOPOLOGY, TOR, OPERA, circuit=-1, version=version, routing="direct", margin_us=MARGIN_US)
    return [r for r in rules if r.table == "TorIngress.timeflow"]


@pytest.fixture(scope="module")
def per_version() -> int:
    return len(_timeflow(0))


@pytest.fixture(scope="module")
def tor(target_name: str) -> Iterator[PacketTarget]:
    """A ToR holding both configurations' time-flow entries (132,000)."""
    kind = "python" if target_name == "python" else "bmv2"
    limits = ServerOptions(max_message_bytes=GRPC_DEFAULT_LIMIT)
    with open_target(kind, pipeline_files("tor_switch"), server_options=limits) as target:
        for version in (0, 1):
            target.client.write_rules(target.schema, "insert", _timeflow(version))
        yield target


def _timeflow_id(target: PacketTarget) -> int:
    return target.schema.table("TorIngress.timeflow").id


def test_the_controller_reads_a_table_of_over_100k_entries(tor: PacketTarget, per_version: int) -> None:
    rules = tor.client.read_rules(tor.schema, _timeflow_id(tor))
    assert len(rules) == 2 * per_version > 100_000
    assert {r.match["meta.version"].value for r in rules} == {0, 1}


def test_a_client_with_default_grpc_settings_reads_it_too(tor: PacketTarget, target_name: str,
                                                          per_version: int) -> None:
    """The Python target streams ReadResponses under 1 MiB each. simple_switch_grpc (PI)
    sends one ReadResponse however large, which such a client refuses: the reason the
    controller's own channels take messages of any size. (The responses are counted from
    their wire bytes: pure-Python protobuf would take a minute to parse them.)"""
    request = p4runtime_pb2.ReadRequest(device_id=1)
    request.entities.add().table_entry.table_id = _timeflow_id(tor)
    with grpc.insecure_channel(tor.client.address) as channel:
        read = channel.unary_stream("/p4.v1.P4Runtime/Read", request_serializer=p4runtime_pb2.ReadRequest.SerializeToString,
                                    response_deserializer=None)
        if target_name == "bmv2":
            with pytest.raises(grpc.RpcError) as caught:
                list(read(request, timeout=120))
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            return
        responses = list(read(request, timeout=120))
    assert len(responses) > 1
    assert max(map(len, responses)) <= MAX_RESPONSE_BYTES
    assert sum(len(list(entity_frames(r))) for r in responses) == 2 * per_version


def test_cleaning_up_an_old_configuration_of_the_largest_schedule(tor: PacketTarget, per_version: int,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """What a reconfiguration's clean-up does, and the next run's survey redoes when a run
    was interrupted: delete every versioned entry of the old version (runs last: it empties
    version 0)."""
    monkeypatch.setattr(session_module, "GC_PAUSE_S", 0.0)  # no traffic to let through
    monkeypatch.setattr(session_module, "GC_BATCH", 1_000)
    live = LiveSwitch(TOR, tor.client, tor.schema, circuit=-1)
    assert live.collect(1) == per_version
    left = tor.client.read_rules(tor.schema)
    assert len(left) == per_version
    assert {r.match["meta.version"].value for r in left} == {1}
    assert live.collect(1) == 0, "a second clean-up finds nothing left"
