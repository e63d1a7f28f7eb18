"""The native engine against the Python engine: the same entries, the same random,
truncated and mutated frames, byte-identical outputs in order and identical counters.

Every program of the repository is covered: the conformance corpus's cases, the basic ones
and the v1model constructs' (with their entries, multicast groups, clone sessions,
profiles and meters) and entries compiled by
the controller (a rail fat-tree leaf with ECMP groups, a spine, pinned circuits). Programs
the native engine does not support yet are listed with their reason in
``EXPECTED_UNSUPPORTED``: the list can only change deliberately.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conformance_project import PROGRAMS
from conformance_v1model import PROGRAMS as V1MODEL_PROGRAMS
from test_conformance import install

from controller.p4build import PROGRAM_DIRS, Artifact, pipeline_files, programs_in
from controller.p4runtime.entities import encode_rule, update
from controller.switch_process import CPU_PORT
from packettest import PacketTarget, open_target
from packettest.frames import ethernet, ipv4, udp
from pybmv2.program import Program
from pybmv2.switch import DigestSample

#: programs the native engine refuses, with (a part of) the reason it gives (``auto`` runs
#: them on the Python engine): none, every program of the repository runs natively
EXPECTED_UNSUPPORTED: dict[str, str] = {}
FRAMES_PER_CASE = 4000
CLOCK_US = 5_000_000  # both engines see the same global timestamps


@dataclass(frozen=True)
class Case:
    name: str
    artifact: Artifact
    install: Callable[[PacketTarget], None]
    seeds: tuple[tuple[int, bytes], ...]


def _conformance_cases() -> Iterator[Case]:
    for prog in (*PROGRAMS, *V1MODEL_PROGRAMS):
        art = pipeline_files(prog.program, PROGRAM_DIRS[prog.home])
        yield Case(prog.name, art, lambda sw, prog=prog: install(sw, prog),
                   tuple((port, frame) for _, port, frame in prog.packets))


def _rules_installer(rules: list) -> Callable[[PacketTarget], None]:
    def run(sw: PacketTarget) -> None:
        sw.client.write([update("insert", encode_rule(sw.schema, r)) for r in rules])

    return run


def _controller_cases() -> Iterator[Case]:
    from controller.routing import compile_fabric
    from controller.schedule import one_shot
    from controller.schedule.ocs_rules import circuit_switch_rules
    from controller.topology.loader import load_topology

    topo = load_topology(Path(__file__).resolve().parents[2] / "topologies" /
                         "rail-fat-tree-4x4.yaml")
    fabric = compile_fabric(topo)
    addresses = [nic.address.split("/")[0] for h in topo.hosts for nic in h.nics]
    seeds = []
    for i, dst in enumerate(addresses):
        payload = udp(1000 + i, 4791, bytes(range(i % 7, 40)))
        seeds.append((1 + i % 4, ethernet("02:00:00:00:00:01", "02:00:00:00:00:02", 0x0800,
                                          ipv4(addresses[(i + 3) % len(addresses)], dst, payload))))
    rail = pipeline_files("rail_switch")
    for name in ("rail0", "spine0"):
        if name in fabric:
            yield Case(f"rail_switch_{name}", rail, _rules_installer(list(fabric[name].rules)),
                       tuple(seeds))
    ocs = circuit_switch_rules(one_shot([(1, 2, 0)]), 0)
    yield Case("circuit_switch_one_shot", pipeline_files("circuit_switch"), _rules_installer(ocs),
               tuple((p, bytes(range(p, 64 + p))) for p in (1, 2, 3, 4)))


CASES = [*_conformance_cases(), *_controller_cases()]


def _fuzz(rng: random.Random, seeds: tuple[tuple[int, bytes], ...], n: int
          ) -> Iterator[tuple[int, bytes]]:
    """Seeds as they are, truncated, mutated, bit-flipped, extended, and random bytes."""
    ports = (1, 2, 3, 4, CPU_PORT)
    for i in range(n):
        port, base = rng.choice(seeds)
        if rng.random() < 0.2:
            port = rng.choice(ports)
        kind = i % 6
        if kind == 1:
            base = base[: rng.randrange(len(base) + 1)]
        elif kind == 2:
            b = bytearray(base)
            for _ in range(rng.randrange(1, 7)):
                if b:
                    b[rng.randrange(len(b))] = rng.randrange(256)
            base = bytes(b)
        elif kind == 3:
            b = bytearray(base)
            for _ in range(rng.randrange(1, 4)):
                if b:
                    bit = rng.randrange(min(len(b), 64) * 8)
                    b[bit // 8] ^= 1 << (bit % 8)
            base = bytes(b)
        elif kind == 4:
            base = base + rng.randbytes(rng.randrange(1, 40))
        elif kind == 5:
            base = rng.randbytes(rng.randrange(0, 160))
        yield port, base


def _state(program: Program) -> dict[str, object]:
    """Every count and register cell the data plane changes."""
    ext = program.externs
    out: dict[str, object] = {}
    for name, c in ext.counters.items():
        out[f"counter {name}"] = (list(c.packets), list(c.bytes))
    for name, r in ext.registers.items():
        out[f"register {name}"] = list(r.values)
    for name, t in program.tables.items():
        out[f"direct {name}"] = sorted((e.handle, e.packets, e.bytes) for e in t.entries())
    return out


def test_native_support_is_as_expected() -> None:
    from pybmv2.native import native_support

    found = {}
    for directory in PROGRAM_DIRS:
        for json_path in programs_in(directory):
            found[json_path.stem] = native_support(Program.from_file(pipeline_files(
                json_path.stem, directory).json))
    unsupported = {name: reason for name, reason in found.items() if reason is not None}
    assert set(unsupported) == set(EXPECTED_UNSUPPORTED), unsupported
    for name, part in EXPECTED_UNSUPPORTED.items():
        assert part in unsupported[name], unsupported[name]


def _supported(case: Case) -> bool:
    return case.artifact.json.stem not in EXPECTED_UNSUPPORTED


@pytest.mark.parametrize("case", [c for c in CASES if _supported(c)], ids=lambda c: c.name)
def test_engines_agree_on_fuzzed_frames(case: Case, target_name: str) -> None:
    if target_name != "python":
        pytest.skip("compares the Python target's two engines")
    digests: dict[str, list[DigestSample]] = {"python": [], "native": []}
    with open_target("python", case.artifact) as py, \
            open_target("python", case.artifact, engine="native") as nat:
        for engine, sw in (("python", py), ("native", nat)):
            switch = sw.switch  # type: ignore[attr-defined]
            switch.clock = lambda: CLOCK_US
            case.install(sw)
            chained = switch.on_digest

            def record(sample: DigestSample, engine: str = engine, chained=chained) -> None:
                digests[engine].append(sample)
                if chained is not None:
                    chained(sample)

            switch.on_digest = record
        assert nat.switch.engine_name == "native"  # type: ignore[attr-defined]
        rng = random.Random(f"native-differential-{case.name}")
        frames = list(_fuzz(rng, case.seeds, FRAMES_PER_CASE))
        at = 0
        forwarded = 0
        while at < len(frames):
            batch = frames[at: at + rng.randrange(1, 17)]
            want = [out for port, frame in batch for out in py.switch.process(port, frame)]  # type: ignore[attr-defined]
            got = nat.switch.process_batch(batch)  # type: ignore[attr-defined]
            assert got == want, f"frames {at}..{at + len(batch) - 1}: {batch}"
            forwarded += len(want)
            at += len(batch)
        assert _state(nat.switch.program) == _state(py.switch.program)  # type: ignore[attr-defined]
        assert digests["native"] == digests["python"]
    assert forwarded, "the fuzzed frames exercised no forwarding path"
