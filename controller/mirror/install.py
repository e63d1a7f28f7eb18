"""Install, remove and read a job's mirror state on the switches (the I/O side).

Install is all or nothing: every affected switch is checked first (the job's session id
must not be used there by another job's flows or clone session), then each switch gets its
clone session and entries; if any switch rejects its part, the switches already written are
cleaned again, so nothing is left half-installed. Remove deletes exactly the job's entries
and clone sessions, nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from controller.errors import MlfabricError
from controller.install import pipeline_schema, switch_clients
from controller.mirror.compile import MIRROR_SELECT, MirrorProgram, SwitchMirror
from controller.p4runtime.client import P4ClientError, P4RuntimeClient
from controller.p4runtime.entities import (
    Exact,
    TableRule,
    clone_session_entry,
    decode_rule,
    encode_rule,
    rule_key,
    update,
)
from controller.p4runtime.schema import P4Schema

__all__ = ["MirrorConflict", "MirrorRow", "install_mirror", "read_mirror", "remove_mirror"]


class MirrorConflict(MlfabricError):
    """The job's session id (or clone session) is already used on a switch by another job."""


@dataclass(frozen=True)
class MirrorRow:
    """One installed mirror_select entry of a job, with its hit counters."""

    switch: str
    src: str
    dst: str
    dst_port: int
    clone_session: int
    packets: int
    bytes: int


def _schema() -> P4Schema:
    return pipeline_schema("rail_switch")[0]


def _clone_sessions(client: P4RuntimeClient, session: int) -> list[tuple[int, int]]:
    ent = p4runtime_pb2.Entity()
    ent.packet_replication_engine_entry.clone_session_entry.session_id = session
    try:
        found = client.read([ent])
    except P4ClientError:
        return []
    out = []
    for e in found:
        cs = e.packet_replication_engine_entry.clone_session_entry
        if cs.session_id == session:
            out += [(r.egress_port, r.instance) for r in cs.replicas]
    return out


def _installed(client: P4RuntimeClient, schema: P4Schema, table: str) -> list[TableRule]:
    return client.read_rules(schema, schema.table(table).id)


def _check_free(name: str, want: SwitchMirror, client: P4RuntimeClient, schema: P4Schema) -> bool:
    """Raise MirrorConflict if another job holds the session here; True if already installed."""
    ours = {rule_key(r) for r in want.rules}
    theirs = [r for r in _installed(client, schema, MIRROR_SELECT)
              if r.params.get("session") == want.clone_session and rule_key(r) not in ours]
    if theirs:
        r = theirs[0]
        raise MirrorConflict(
            f"session id {want.clone_session} (clone session) is in use on {name} by another job's flow "
            f"{_ip(_exact(r, 'hdr.ipv4.src_addr'))} -> {_ip(_exact(r, 'hdr.ipv4.dst_addr'))}: "
            "give this job another session id")
    replicas = _clone_sessions(client, want.clone_session)
    if replicas and sorted(replicas) != sorted(want.replicas):
        raise MirrorConflict(f"clone session {want.clone_session} is in use on {name} with replicas "
                             f"{replicas}: give this job another session id")
    return bool(replicas)


def _ip(value: int) -> str:
    return ".".join(str((value >> s) & 0xFF) for s in (24, 16, 8, 0))


def _exact(rule: TableRule, field: str) -> int:
    m = rule.match[field]
    if not isinstance(m, Exact):
        raise MlfabricError(f"{rule.table}: field {field} is not an exact match ({m})")
    return m.value


def _delete_updates(want: SwitchMirror, client: P4RuntimeClient, schema: P4Schema) -> list[p4runtime_pb2.Update]:
    """Deletes of exactly the entries and clone session of ``want`` that are on the switch."""
    keys = {rule_key(r) for r in want.rules}
    tables = {r.table for r in want.rules}
    present = [r for t in sorted(tables) for r in _installed(client, schema, t) if rule_key(r) in keys]
    ups = [update("delete", encode_rule(schema, r)) for r in present]
    if _clone_sessions(client, want.clone_session):
        ups.append(update("delete", clone_session_entry(want.clone_session, [])))
    return ups


def install_mirror(program: MirrorProgram, *, addresses: Mapping[str, str] | None = None,
                   election_id: int = 1) -> list[str]:
    """Install ``program`` on its switches; returns their names. All or nothing."""
    topo, schema = program.job.topology, _schema()
    with switch_clients(topo, program.switch_names, addresses, election_id) as clients:
        done_already = {sw.switch: _check_free(sw.switch, sw, clients[sw.switch], schema)
                        for sw in program.switches}
        written: list[SwitchMirror] = []
        try:
            for sw in program.switches:
                client = clients[sw.switch]
                if done_already[sw.switch]:
                    client.write_checked(_delete_updates(sw, client, schema))
                client.write_checked([update("insert", clone_session_entry(sw.clone_session, sw.replicas))])
                written.append(sw)
                client.write_checked([update("insert", encode_rule(schema, r)) for r in sw.rules])
        except P4ClientError as exc:
            for sw in written:
                client = clients[sw.switch]
                client.write_checked(_delete_updates(sw, client, schema))
            raise MlfabricError(f"installing mirror job {program.job.spec.name!r} on "
                                f"{written[-1].switch if written else program.switches[0].switch} failed "
                                f"({exc}); rolled back on {', '.join(s.switch for s in written) or 'no switch'}") from exc
    return list(program.switch_names)


def remove_mirror(program: MirrorProgram, *, addresses: Mapping[str, str] | None = None,
                  election_id: int = 1) -> int:
    """Delete exactly ``program``'s entries and clone sessions; returns how many were deleted."""
    topo, schema = program.job.topology, _schema()
    removed = 0
    with switch_clients(topo, program.switch_names, addresses, election_id) as clients:
        for sw in program.switches:
            ups = _delete_updates(sw, clients[sw.switch], schema)
            if ups:
                clients[sw.switch].write_checked(ups)
            removed += len(ups)
    return removed


def read_mirror(program: MirrorProgram, *, addresses: Mapping[str, str] | None = None,
                election_id: int = 0) -> list[MirrorRow]:
    """The job's mirror_select entries as installed, with their direct counters."""
    topo, schema = program.job.topology, _schema()
    rows = []
    with switch_clients(topo, program.switch_names, addresses, election_id) as clients:
        for sw in program.switches:
            keys = {rule_key(r) for r in sw.rules}
            client = clients[sw.switch]
            ent = p4runtime_pb2.Entity()
            ent.table_entry.table_id = schema.table(MIRROR_SELECT).id
            ent.table_entry.counter_data.SetInParent()
            for e in client.read([ent]):
                rule = decode_rule(schema, e.table_entry)
                if rule_key(rule) not in keys:
                    continue
                rows.append(MirrorRow(sw.switch, _ip(_exact(rule, "hdr.ipv4.src_addr")),
                                      _ip(_exact(rule, "hdr.ipv4.dst_addr")),
                                      _exact(rule, "meta.l4_dst_port"), sw.clone_session,
                                      e.table_entry.counter_data.packet_count,
                                      e.table_entry.counter_data.byte_count))
    return rows
