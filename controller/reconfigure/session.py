"""A controller's live hold on an optical fabric for reconfigurations: connected clients, every
switch's clock estimate and the running configuration version, surveyed once (an earlier
run's unfinished flip is finished and its leftovers deleted on the way).

A long-lived controller keeps one session across reconfigurations, so that a change costs
two rounds of writes (prepare, commit) and no probing: the switches of an emulation share
the machine's monotonic clock, so an estimate stays valid for the switch's lifetime.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

from controller.errors import MlfabricError
from controller.install import pipeline_schema
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.entities import Exact, decode_rule, encode_rule, update
from controller.p4runtime.schema import P4Schema
from controller.schedule.clock import ClockEstimate, controller_now_us, probe_clock
from controller.schedule.install import circuit_switches
from controller.topology.model import Switch, Topology

__all__ = ["FabricSession", "LiveSwitch"]

T = TypeVar("T")

#: tables whose entries carry the configuration version, per role
VERSIONED = {"ocs": ("OcsIngress.slice_of_phase", "OcsIngress.circuit"),
             "tor": ("TorIngress.slot_of_phase", "TorIngress.timeflow", "TorIngress.tdn_of_slot")}
CLOCK = {"ocs": "OcsIngress.clock", "tor": "TorIngress.clock"}
#: the old version's entries are deleted GC_BATCH at a time, GC_PAUSE_S apart. Chosen by
#: measurement (bench/cleanup_bench.py: 66,000 entries of an Opera ToR while a probe crosses
#: it): 256 with no pause takes 9 s on every target, and forwarding's worst probe meanwhile is
#: 15 ms (native engine), 25 ms (Python engine) and 16 ms (BMv2); batches of 1,000 or 4,000
#: are no faster and let the Python engine's worst probe reach 60-68 ms; the old 32 entries
#: 20 ms apart took 55 s and its worst probe was no better (11 ms)
GC_BATCH = 256
GC_PAUSE_S = 0.0
#: tables a reconfiguration fills only while it runs
TRANSIENT = {"ocs": (), "tor": ("TorIngress.flip", "TorIngress.timeflow_flip")}


@dataclass
class LiveSwitch:
    sw: Switch
    client: P4RuntimeClient
    schema: P4Schema
    circuit: int  # -1 for a ToR
    clock: ClockEstimate | None = None

    def write(self, rules: list) -> None:
        """Insert ``rules``; the error names the switch."""
        try:
            self.client.write_rules(self.schema, "insert", rules)
        except MlfabricError as exc:
            raise MlfabricError(f"{self.sw.name} rejected its part: {exc}") from None

    def delete_where(self, tables: Sequence[str], keep: Callable[[dict[str, object]], bool], *,
                     gently: bool = False) -> int:
        """Delete the entries of ``tables`` that ``keep`` rejects. ``gently``: in small
        batches with pauses, for garbage that may go slowly while traffic flows (a switch
        applies a batch between packets, and a long one delays them)."""
        doomed = [r for name in tables for r in self.client.read_rules(self.schema, self.schema.table(name).id)
                  if not keep(dict(r.match))]
        step = GC_BATCH if gently else max(1, len(doomed))
        for start in range(0, len(doomed), step):
            if start and GC_PAUSE_S:
                time.sleep(GC_PAUSE_S)
            self.client.write_rules(self.schema, "delete", doomed[start:start + step])
        return len(doomed)

    def clock_ranges(self) -> list:
        return self.client.read_table_entries(self.schema.table(CLOCK[self.sw.role]).id)

    def scrub(self, version: int) -> None:
        """Delete ``version``'s entries and every transient entry (a rollback)."""
        role = self.sw.role
        self.delete_where(VERSIONED[role], lambda m: _version_of(m) != version)
        self.delete_where((CLOCK[role], *TRANSIENT[role]), lambda m: False)

    def finish(self) -> bool:
        """Make the clock's range entry (the new configuration, in effect) the default action
        and delete the transient entries. False if there was nothing to finish."""
        ranges = self.clock_ranges()
        if not ranges:
            return False
        new = decode_rule(self.schema, ranges[0])
        default = type(new)(new.table, {}, new.action, new.params, is_default=True)
        self.client.write_checked([update("modify", encode_rule(self.schema, default))])
        self.delete_where((CLOCK[self.sw.role], *TRANSIENT[self.sw.role]), lambda m: False)
        return True

    def collect(self, version: int) -> int:
        """Delete, gently, every versioned entry not of ``version`` (an old configuration's)."""
        return self.delete_where(VERSIONED[self.sw.role], lambda m: _version_of(m) == version, gently=True)

    def running(self) -> tuple[int, bool]:
        """The version and calendar-queue flag of the switch's running configuration."""
        table = self.schema.table(CLOCK[self.sw.role]).id
        default = decode_rule(self.schema, self.client.read_default_entry(table))
        return int(default.params.get("version", 0)), bool(default.params.get("hold", 0))


def _version_of(match: dict[str, object]) -> int | None:
    v = match.get("meta.version")
    return v.value if isinstance(v, Exact) else None


class FabricSession:
    """Connect to every circuit switch and ToR of ``topo``, probe their clocks and read the
    running configuration (see the module docstring). Use as a context manager."""

    def __init__(self, topo: Topology, *, election_id: int = 1, probes: int = 8) -> None:
        self.topo, self.election_id, self.probes = topo, election_id, probes
        self.switches: list[LiveSwitch] = []
        self.version = 0
        self.hold = False
        self.surveyed_ms = 0.0
        self.finished_earlier: tuple[str, ...] = ()
        self._stack = contextlib.ExitStack()

    def parallel(self, fn: Callable[[LiveSwitch], T], switches: Sequence[LiveSwitch] | None = None) -> list[T]:
        todo = list(self.switches if switches is None else switches)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
            return list(pool.map(fn, todo))

    @property
    def worst_skew_us(self) -> float:
        return max((x.clock.uncertainty_us for x in self.switches if x.clock), default=0.0)

    def __enter__(self) -> FabricSession:
        t0 = controller_now_us()
        ocs = circuit_switches(self.topo)
        order = [(sw, u) for u, sw in enumerate(ocs)] + [(sw, -1) for sw in self.topo.switches if sw.role == "tor"]
        for sw, _ in order:
            if not sw.grpc:
                raise MlfabricError(f"switch {sw.name} has no gRPC address: run the emulation (mlfabric fabric up)")
        try:
            def connect(item: tuple[Switch, int]) -> LiveSwitch:
                sw, u = item
                client = P4RuntimeClient(sw.grpc or "", device_id=sw.device_id, election_id=self.election_id)
                self._stack.callback(client.close)
                client.connect()
                return LiveSwitch(sw, client, pipeline_schema(sw.program)[0], u)

            with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(order))) as pool:
                self.switches = list(pool.map(connect, order))
            self._survey()
        except BaseException:
            self._stack.close()
            raise
        self.surveyed_ms = (controller_now_us() - t0) / 1000
        return self

    def _survey(self) -> None:
        def survey(x: LiveSwitch) -> tuple[int, bool, bool]:
            x.clock = probe_clock(x.client, x.schema, probes=self.probes)
            finished = False
            ranges = [decode_rule(x.schema, e) for e in x.clock_ranges()]
            if ranges:
                low = ranges[0].match["standard_metadata.ingress_global_timestamp"]
                if x.clock.switch_time(controller_now_us()) < getattr(low, "low", 0):
                    raise MlfabricError(f"{x.sw.name}: another reconfiguration is under way (its flip is still ahead)")
                finished = x.finish()
            version, hold = x.running()
            x.collect(version)  # what an interrupted run left of the other version
            return version, hold, finished

        states = self.parallel(survey)
        versions = {v for v, _, _ in states}
        if len(versions) != 1:
            raise MlfabricError(f"the switches run different configuration versions {sorted(versions)}: "
                                "reinstall a schedule (mlfabric schedule install)")
        self.version = versions.pop()
        self.hold = any(h for (_, h, _), x in zip(states, self.switches, strict=True) if x.sw.role == "tor")
        self.finished_earlier = tuple(x.sw.name for (_, _, f), x in zip(states, self.switches, strict=True) if f)

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self._stack.close()
