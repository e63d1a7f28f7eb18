"""The native engine follows the control plane: random P4Runtime writes between batches.

Both engines get the same random updates between batches of fuzzed frames: table entries
inserted, modified and deleted (every match kind, random actions and parameters, random
priorities), default actions changed, multicast groups and clone sessions inserted,
changed and deleted, selector members changed and groups regrouped. Each write must
succeed or fail the same way on both; outputs, counters, registers and digests must stay
identical. This exercises the path P4Runtime takes into the native engine.
"""

from __future__ import annotations

import random

import pytest
from test_native_differential import CASES, CLOCK_US, Case, _fuzz, _state

from controller.p4runtime.client import P4ClientError
from controller.p4runtime.entities import (
    Exact,
    Lpm,
    Optional,
    Range,
    TableRule,
    Ternary,
    action_profile_group,
    clone_session_entry,
    encode_rule,
    multicast_group_entry,
    update,
)
from controller.p4runtime.schema import P4Schema, TableInfo
from packettest import PacketTarget, open_target

STEPS = 150


class _Churn:
    """Random control-plane updates for one program, the same for both engines."""

    def __init__(self, rng: random.Random, schema: P4Schema, seeds: tuple[tuple[int, bytes], ...],
                 members: dict[str, list[int]]) -> None:
        self.rng = rng
        self.schema = schema
        self.seeds = seeds
        self.members = members  # selector profile -> member ids the case installed
        indirect = {t.preamble.name for t in schema.p4info.tables if t.implementation_id}
        tables = [t for t in schema.tables if t.name not in indirect and not t.is_const]
        self.keyed = [t for t in tables if t.match_fields]
        self.defaults = [t for t in tables if not t.const_default_action_id]
        self.rules: list[TableRule] = []

    def value(self, width: int) -> int:
        """Small values, all-ones, and bytes of the seed frames (so entries can match)."""
        rng = self.rng
        r = rng.random()
        if r < 0.3:
            return rng.choice((0, 1, 2, 3, 4, 5, 7, 8, 9, 10)) & ((1 << width) - 1)
        if r < 0.4:
            return (1 << width) - 1
        _, frame = rng.choice(self.seeds)
        n = (width + 7) // 8
        at = rng.randrange(max(len(frame) - n, 0) + 1)
        return int.from_bytes(frame[at:at + n].ljust(n, b"\0"), "big") & ((1 << width) - 1)

    def params(self, action_id: int) -> tuple[str, dict[str, int]]:
        action = self.schema.action(action_id)
        return action.name, {p.name: self.value(p.bitwidth) for p in action.params}

    def rule(self, table: TableInfo) -> TableRule:
        rng = self.rng
        match: dict = {}
        for mf in table.match_fields:
            w = mf.bitwidth
            if mf.match_type == "exact":
                match[mf.name] = Exact(self.value(w))
            elif mf.match_type == "lpm":
                plen = rng.randrange(w + 1)
                mask = ((1 << w) - 1) ^ ((1 << (w - plen)) - 1)
                match[mf.name] = Lpm(self.value(w) & mask, plen)
            elif mf.match_type == "ternary":
                mask = rng.choice((0, (1 << w) - 1, self.value(w)))
                match[mf.name] = Ternary(self.value(w) & mask, mask)
            elif mf.match_type == "range":
                a, b = sorted((self.value(w), self.value(w)))
                match[mf.name] = Range(a, b)
            elif mf.match_type == "optional":
                match[mf.name] = Optional(self.value(w))
        needs = any(mf.match_type in ("ternary", "range", "optional") for mf in table.match_fields)
        action, params = self.params(rng.choice(table.action_ids))
        return TableRule(table.name, match, action, params, rng.randrange(1, 8) if needs else 0)

    def step(self) -> list:
        rng = self.rng
        out = []
        for _ in range(rng.randrange(1, 4)):
            r = rng.random()
            if r < 0.35 and self.keyed:
                rule = self.rule(rng.choice(self.keyed))
                self.rules.append(rule)
                out.append(update("insert", encode_rule(self.schema, rule)))
            elif r < 0.5 and self.rules:
                old = rng.choice(self.rules)
                action, params = self.params(rng.choice(self.schema.table(old.table).action_ids))
                new = TableRule(old.table, old.match, action, params, old.priority)
                self.rules[self.rules.index(old)] = new
                out.append(update("modify", encode_rule(self.schema, new)))
            elif r < 0.65 and self.rules:
                old = self.rules.pop(rng.randrange(len(self.rules)))
                entry = encode_rule(self.schema, old)
                entry.ClearField("action")
                out.append(update("delete", entry))
            elif r < 0.75 and self.defaults:
                table = rng.choice(self.defaults)
                action, params = self.params(rng.choice(table.action_ids))
                out.append(update("modify", encode_rule(
                    self.schema, TableRule(table.name, {}, action, params, is_default=True))))
            elif r < 0.85:
                replicas = [(rng.randrange(1, 5), rng.randrange(3)) for _ in range(rng.randrange(4))]
                replicas = list(dict.fromkeys(replicas))
                kind = rng.choice(("insert", "modify", "delete"))
                if rng.random() < 0.5:
                    out.append(update(kind, multicast_group_entry(rng.randrange(1, 10), replicas)))
                else:
                    out.append(update(kind, clone_session_entry(rng.randrange(1, 10), replicas,
                                                                packet_length_bytes=rng.choice((0, 0, 20)))))
            elif self.members:
                profile = rng.choice(sorted(self.members))
                ids = self.members[profile]
                chosen = rng.sample(ids, rng.randrange(len(ids) + 1))
                group = 100 if profile == "ecmp_sel" else 200
                out.append(update("modify", action_profile_group(
                    self.schema, profile, group, [(m, 1) for m in chosen])))
        return out


def _write(sw: PacketTarget, updates: list) -> list[str]:
    try:
        sw.client.write(updates)
    except P4ClientError as exc:
        return [f"{e.index}:{e.code}" for e in exc.errors] or [exc.code]
    return []


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_native_engine_follows_random_writes(case: Case, target_name: str) -> None:
    if target_name != "python":
        pytest.skip("compares the Python target's two engines")
    from conformance_project import PROGRAMS

    members: dict[str, list[int]] = {}
    for prog in PROGRAMS:
        if prog.name == case.name:
            for m in prog.members:
                members.setdefault(m.profile, []).append(m.id)
    members = {p: ids for p, ids in members.items() if p in ("ecmp_sel", "wide_sel")}
    with open_target("python", case.artifact) as py, \
            open_target("python", case.artifact, engine="native") as nat:
        py.switch.pre.truncation = nat.switch.pre.truncation = True  # the extension: churn covers truncation
        for sw in (py, nat):
            sw.switch.clock = lambda: CLOCK_US  # type: ignore[attr-defined]
            case.install(sw)
        rng = random.Random(f"native-churn-{case.name}")
        churn = _Churn(rng, py.schema, case.seeds, members)
        frames = list(_fuzz(rng, case.seeds, STEPS * 4))
        for step in range(STEPS):
            updates = churn.step()
            assert _write(nat, updates) == _write(py, updates), f"step {step}: {updates}"
            # the observers applied every write: comparing everything finds nothing to do
            assert nat.switch.sync() == 0, f"step {step}: {updates}"  # type: ignore[attr-defined]
            batch = frames[4 * step: 4 * step + rng.randrange(1, 5)]
            want = [o for port, frame in batch for o in py.switch.process(port, frame)]  # type: ignore[attr-defined]
            assert nat.switch.process_batch(batch) == want, f"step {step}: {batch}"  # type: ignore[attr-defined]
        assert _state(nat.switch.program) == _state(py.switch.program)  # type: ignore[attr-defined]
