"""Set up TDN notifications on a running optical fabric's ToRs (I/O).

Each ToR gets its :class:`~controller.tdtcp.notify.NotifyPlan`: the ``notify`` default
action, one ``notify_host`` entry per chosen host and the clone session of their ports
(deleted when nobody is to be told). It replaces whatever notification set-up was there.
"""

from __future__ import annotations

from collections.abc import Mapping

from p4.v1 import p4runtime_pb2

from controller.errors import MlfabricError
from controller.install import pipeline_schema
from controller.p4runtime.client import P4ClientError, P4RuntimeClient
from controller.p4runtime.entities import clone_session_entry, encode_rule, update
from controller.tdtcp.notify import NOTIFY_SESSION, NotifyPlan, notify_plan
from controller.topology.model import Topology

__all__ = ["install_notifications"]


def _has_session(client: P4RuntimeClient) -> bool:
    ent = p4runtime_pb2.Entity()
    ent.packet_replication_engine_entry.clone_session_entry.session_id = NOTIFY_SESSION
    try:
        return any(e.packet_replication_engine_entry.clone_session_entry.session_id == NOTIFY_SESSION
                   for e in client.read([ent]))
    except P4ClientError:
        return False


def install_notifications(topo: Topology, targets: Mapping[str, str], *, election_id: int = 1) -> list[NotifyPlan]:
    """Give each ToR named in ``targets`` (ToR -> ``all``, ``none`` or a host of its rack)
    its notification set-up; every plan is compiled (and bad input refused) first."""
    plans = [notify_plan(topo, tor, target) for tor, target in targets.items()]
    for plan in plans:
        sw = topo.switch(plan.tor)
        if not sw.grpc:
            raise MlfabricError(f"switch {sw.name} has no gRPC address: run the emulation (mlfabric fabric up)")
        schema, _ = pipeline_schema(sw.program)
        with P4RuntimeClient(sw.grpc, device_id=sw.device_id, election_id=election_id).connect() as client:
            old = client.read_table_entries(schema.table("TorEgress.notify_host").id)
            if old:
                client.write_checked([update("delete", e) for e in old])
            existed = _has_session(client)
            ups = []
            if plan.replicas:
                ups.append(update("modify" if existed else "insert", clone_session_entry(NOTIFY_SESSION, plan.replicas)))
            elif existed:
                ups.append(update("delete", clone_session_entry(NOTIFY_SESSION, [])))
            ups += [update("modify" if r.is_default else "insert", encode_rule(schema, r)) for r in plan.rules]
            client.write_checked(ups)
    return plans
