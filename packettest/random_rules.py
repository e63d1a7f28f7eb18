"""Random table rules of a program's schema, for tests that compare encoders and decoders."""

from __future__ import annotations

import random

from controller.p4runtime.entities import (
    Exact,
    Lpm,
    MatchValue,
    Optional,
    Range,
    TableRule,
    Ternary,
)
from controller.p4runtime.schema import P4Schema

__all__ = ["random_rule"]


def random_rule(rng: random.Random, schema: P4Schema, table_name: str) -> TableRule:
    """A rule of ``table_name`` with random keys of every match kind, action and parameters."""
    table = schema.table(table_name)
    match: dict[str, MatchValue] = {}
    for mf in table.match_fields:
        w = mf.bitwidth
        v = rng.randrange(1 << w)
        if mf.match_type == "exact":
            match[mf.name] = Exact(v)
        elif mf.match_type == "lpm":
            plen = rng.randrange(w + 1)
            match[mf.name] = Lpm(v & (((1 << w) - 1) ^ ((1 << (w - plen)) - 1)), plen)
        elif mf.match_type == "ternary":
            mask = rng.randrange(1 << w)
            match[mf.name] = Ternary(v & mask, mask)
        elif mf.match_type == "range":
            lo = rng.randrange(1 << w)
            match[mf.name] = Range(lo, rng.randrange(lo, 1 << w))
        else:
            match[mf.name] = Optional(v)
    action = schema.action(rng.choice(table.action_ids))
    params = {p.name: rng.randrange(1 << p.bitwidth) for p in action.params}
    return TableRule(table.name, match, action.name, params, rng.randrange(1, 1000) if table.needs_priority else 0)
