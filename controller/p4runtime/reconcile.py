"""Desired versus installed state: pure diffing, and the updates that reconcile them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from controller.p4runtime.entities import TableRule, encode_rule, rule_key, update
from controller.p4runtime.schema import P4Schema

__all__ = ["RuleDiff", "diff_rules", "inverse", "sync_updates"]


@dataclass(frozen=True, slots=True)
class RuleDiff:
    """What ``actual`` lacks (missing), holds differently (changed) or holds extra."""

    missing: tuple[TableRule, ...]
    changed: tuple[tuple[TableRule, TableRule], ...]  # (desired, actual)
    extra: tuple[TableRule, ...]

    @property
    def in_sync(self) -> bool:
        return not (self.missing or self.changed or self.extra)

    def summary(self) -> str:
        return f"{len(self.missing)} missing, {len(self.changed)} changed, {len(self.extra)} extra"


def diff_rules(desired: Iterable[TableRule], actual: Iterable[TableRule]) -> RuleDiff:
    """Compare by key (table, match, priority); default entries compare like any other.

    >>> from controller.p4runtime.entities import Exact
    >>> a = TableRule("t", {"f": Exact(1)}, "fwd", {"port": 1})
    >>> b = TableRule("t", {"f": Exact(1)}, "fwd", {"port": 2})
    >>> diff_rules([a], [b]).summary()
    '0 missing, 1 changed, 0 extra'
    """
    want = {rule_key(r): r for r in desired}
    have = {rule_key(r): r for r in actual}
    missing = tuple(r for k, r in want.items() if k not in have)
    extra = tuple(r for k, r in have.items() if k not in want and not r.is_default)
    changed = tuple(
        (r, have[k]) for k, r in want.items()
        if k in have and (r.action, dict(r.params)) != (have[k].action, dict(have[k].params))
    )
    return RuleDiff(missing, changed, extra)


def sync_updates(schema: P4Schema, d: RuleDiff) -> list[p4runtime_pb2.Update]:
    """Deletes of the extra entries, then modifies, then inserts of the missing ones."""
    out = [update("delete", encode_rule(schema, r)) for r in d.extra]
    out += [update("modify", encode_rule(schema, want)) for want, _ in d.changed]
    out += [update("modify" if r.is_default else "insert", encode_rule(schema, r)) for r in d.missing]
    return out


def inverse(u: p4runtime_pb2.Update, before: p4runtime_pb2.Entity | None = None) -> p4runtime_pb2.Update | None:
    """The update that undoes ``u`` (``before`` is the entity a MODIFY overwrote)."""
    if u.type == p4runtime_pb2.Update.INSERT:
        out = p4runtime_pb2.Update(type=p4runtime_pb2.Update.DELETE)
        out.entity.CopyFrom(u.entity)
        return out
    if u.type == p4runtime_pb2.Update.DELETE:
        out = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        out.entity.CopyFrom(before if before is not None else u.entity)
        return out
    if u.type == p4runtime_pb2.Update.MODIFY and before is not None:
        out = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
        out.entity.CopyFrom(before)
        return out
    return None
