"""RECONCILE_AND_COMMIT as PI does it: read the forwarding state, replay it on the new pipeline.

PI's ``pipeline_config_set`` (``device_mgr.cpp``) saves the state with one Read
(:func:`forwarding_state_request`: every action profile member, then every group, table
entry, meter entry and counter entry, so that members and groups come back before the
entries that name them), loads the new pipeline, and writes every entity read back as an
INSERT in one batch that continues on errors (:func:`replay`). What the new pipeline
refuses is lost, and then the whole request fails with UNKNOWN "Error when reconciling
config". Since default entries, direct counters and meters, multicast groups, clone
sessions and digest configurations are not read, the new pipeline starts with its own; and
since counter and meter entries cannot be INSERTed, nor const entries again, nor the weighted
copies of a member that the member read returns, a program with any of those always fails
to reconcile, on simple_switch_grpc as here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import grpc
from p4.v1 import p4runtime_pb2

from pybmv2.errors import TargetError
from pybmv2.runtime.errors import P4RuntimeError

__all__ = ["RECONCILE_FAILED", "forwarding_state_request", "replay"]

#: PI's status when some of the saved state could not be written back
RECONCILE_FAILED = "Error when reconciling config"


def forwarding_state_request(device_id: int) -> p4runtime_pb2.ReadRequest:
    """PI's ``save_forwarding_state`` Read, in its order."""
    request = p4runtime_pb2.ReadRequest(device_id=device_id)
    request.entities.add().action_profile_member.SetInParent()
    request.entities.add().action_profile_group.SetInParent()
    request.entities.add().table_entry.SetInParent()
    request.entities.add().meter_entry.SetInParent()
    request.entities.add().counter_entry.SetInParent()
    return request


def replay(entities: Iterable[p4runtime_pb2.Entity],
           write_one: Callable[[p4runtime_pb2.Update], None]) -> None:
    """Write every entity as an INSERT, going on after failures; raise UNKNOWN
    :data:`RECONCILE_FAILED` at the end if any failed."""
    failed = 0
    for entity in entities:
        update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        update.entity.CopyFrom(entity)
        try:
            write_one(update)
        except (P4RuntimeError, TargetError):
            failed += 1
    if failed:
        raise P4RuntimeError(grpc.StatusCode.UNKNOWN, RECONCILE_FAILED)
