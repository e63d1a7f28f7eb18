"""Requests for another device id than the switch's are answered as PI's server answers them.

PI keeps state per device id, created on first use: a controller may arbitrate for any
device id (and becomes its primary), Write checks that device's arbitration, and a device
that never had a pipeline answers FAILED_PRECONDITION; SetForwardingPipelineConfig fails to
assign the device on BMv2 (one device per process). Run with ``--target bmv2`` to check the
expectations against simple_switch_grpc.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from controller.p4build import pipeline_files
from controller.p4runtime.schema import load_p4info
from packettest import PacketTarget, open_target
from pybmv2.runtime.testing import StreamClient

DEVICE = 1
OTHER = 2
NO_PIPELINE = (grpc.StatusCode.FAILED_PRECONDITION, "No forwarding pipeline config set for this device")
NOT_PRIMARY = (grpc.StatusCode.PERMISSION_DENIED, "Not primary")
SetAction = p4runtime_pb2.SetForwardingPipelineConfigRequest


@pytest.fixture
def sw(target_name: str) -> Iterator[PacketTarget]:
    with open_target(target_name, pipeline_files("rail_switch"), ports=(1, 2), device_id=DEVICE) as target:
        yield target


def _status(call) -> tuple[grpc.StatusCode, str]:
    try:
        result = call()
        if not isinstance(result, p4runtime_pb2.WriteResponse | p4runtime_pb2.SetForwardingPipelineConfigResponse):
            list(result)
    except grpc.RpcError as exc:
        return exc.code(), exc.details()
    return grpc.StatusCode.OK, ""


def _write(sw: PacketTarget, device_id: int, election_id: int | None) -> tuple[grpc.StatusCode, str]:
    req = p4runtime_pb2.WriteRequest(device_id=device_id)
    if election_id is not None:
        req.election_id.low = election_id
    req.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry.table_id = \
        sw.schema.table("ipv4_lpm").id
    return _status(lambda: sw.client.stub.Write(req, timeout=10))


def _set(sw: PacketTarget, device_id: int, action: int, election_id: int | None = None
         ) -> tuple[grpc.StatusCode, str]:
    config = p4runtime_pb2.ForwardingPipelineConfig(
        p4_device_config=pipeline_files("rail_switch").json.read_bytes())
    config.p4info.CopyFrom(load_p4info(pipeline_files("rail_switch").p4info))
    req = SetAction(device_id=device_id, action=action, config=config)
    if election_id is not None:
        req.election_id.low = election_id
    return _status(lambda: sw.client.stub.SetForwardingPipelineConfig(req, timeout=10))


def test_reads_and_writes_for_another_device(sw: PacketTarget) -> None:
    read = p4runtime_pb2.ReadRequest(device_id=OTHER)
    read.entities.add().table_entry.table_id = 0
    assert _status(lambda: sw.client.stub.Read(read, timeout=10)) == NO_PIPELINE
    get = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=OTHER)
    assert _status(lambda: sw.client.stub.GetForwardingPipelineConfig(get, timeout=10)) == NO_PIPELINE
    assert _write(sw, OTHER, None) == NO_PIPELINE  # nobody arbitrated for it: no election id needed
    assert _write(sw, OTHER, 1) == NOT_PRIMARY
    assert sw.client.read_table_entries() == []  # the switch's own device is untouched


def test_arbitration_for_another_device(sw: PacketTarget) -> None:
    primary = StreamClient(sw.client.address, OTHER, election_id=5)
    backup = StreamClient(sw.client.address, OTHER, election_id=3)
    try:
        got = primary.arbitrate()
        assert (got.device_id, got.status.code, got.status.message) == (OTHER, code_pb2.OK, "Is primary")
        got = backup.arbitrate()
        assert (got.status.code, got.status.message, got.election_id.low) == (
            code_pb2.ALREADY_EXISTS, "Is backup", 5)
        assert _write(sw, OTHER, 5) == NO_PIPELINE
        assert _write(sw, OTHER, 3) == NOT_PRIMARY
        assert _write(sw, DEVICE, 5) == NOT_PRIMARY  # the switch's own device has its own primary
        assert sw.client.is_primary
    finally:
        primary.close()
        backup.close()


def test_pipeline_config_for_another_device(sw: PacketTarget) -> None:
    assert _set(sw, OTHER, SetAction.VERIFY) == (grpc.StatusCode.OK, "")
    assert _set(sw, OTHER, SetAction.VERIFY_AND_COMMIT, election_id=1) == NOT_PRIMARY
    assert _set(sw, OTHER, SetAction.COMMIT) == (grpc.StatusCode.UNKNOWN, "Error in second phase of device update")
    for action in (SetAction.VERIFY_AND_SAVE, SetAction.VERIFY_AND_COMMIT, SetAction.RECONCILE_AND_COMMIT):
        assert _set(sw, OTHER, action) == (grpc.StatusCode.UNKNOWN, "Error when trying to assign device")
    # (after that failure simple_switch_grpc keeps a half-made device 2, which a Read
    # crashes; the Python target does not imitate it, and device 1 is unaffected on both)
    assert sw.client.read_table_entries() == []
    assert sw.client.get_pipeline("P4INFO_AND_COOKIE").p4info.tables
