"""Install, compare and reconcile a whole fabric's rules over P4Runtime.

Every switch is handled on its own thread with its own client: pipeline, then the compiled
entries in batches. Failures are collected per switch and reported together, never
half-silently: each failed switch names its first failed update and what the read-back
found installed.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from controller.errors import MlfabricError
from controller.p4build import pipeline_files
from controller.p4runtime.client import P4ClientError, P4RuntimeClient
from controller.p4runtime.reconcile import RuleDiff, diff_rules, sync_updates
from controller.p4runtime.schema import P4Schema, load_p4info
from controller.progress import MultiProgress
from controller.routing.rail_routes import SwitchRules, compile_fabric
from controller.topology.model import Switch, Topology

__all__ = ["InstallOptions", "SwitchReport", "diff_fabric", "install_fabric", "pipeline_schema", "sync_fabric"]


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallOptions:
    batch_size: int = 1000
    atomic: bool = False
    election_id: int = 1
    timeout: float = 30.0
    load_pipeline: bool = True
    workers: int = 16


@dataclass(frozen=True, slots=True)
class SwitchReport:
    switch: str
    entries: int
    seconds: float
    error: str | None = None
    diff: RuleDiff | None = None


def _address(sw: Switch, addresses: Mapping[str, str] | None) -> str:
    addr = (addresses or {}).get(sw.name) or sw.grpc
    if not addr:
        raise MlfabricError(f"switch {sw.name} has no gRPC address: give one in the topology or run the emulation")
    return addr


@contextlib.contextmanager
def switch_clients(topo: Topology, names: Iterable[str], addresses: Mapping[str, str] | None,
                   election_id: int) -> Iterator[dict[str, P4RuntimeClient]]:
    """A connected client per switch of ``names`` (at ``addresses[name]``, else the topology's
    gRPC address), all closed when the ``with`` body ends."""
    clients: dict[str, P4RuntimeClient] = {}
    try:
        for name in names:
            sw = topo.switch(name)
            clients[name] = P4RuntimeClient(_address(sw, addresses), device_id=sw.device_id,
                                            election_id=election_id).connect()
        yield clients
    finally:
        for c in clients.values():
            c.close()


def _connect(sw: Switch, addresses: Mapping[str, str] | None, opts: InstallOptions) -> P4RuntimeClient:
    return P4RuntimeClient(_address(sw, addresses), device_id=sw.device_id,
                           election_id=opts.election_id, timeout=opts.timeout).connect()


@functools.lru_cache(maxsize=16)
def pipeline_schema(program: str) -> tuple[P4Schema, bytes]:
    """The P4Info index and BMv2 JSON of a committed program, read once per process."""
    art = pipeline_files(program)
    p4info = load_p4info(art.p4info)
    return P4Schema(p4info), art.json.read_bytes()


def _install_one(sw: Switch, rules: SwitchRules, addresses: Mapping[str, str] | None,
                 opts: InstallOptions, progress: MultiProgress | None) -> SwitchReport:
    t0 = time.monotonic()
    schema, device_config = pipeline_schema(sw.program)
    n = len(rules.rules)
    if progress:
        progress.set_total(sw.name, n)
    with _connect(sw, addresses, opts) as client:
        if not client.is_primary:
            raise MlfabricError(f"switch {sw.name}: another controller is primary (election id {client.primary_election_id})")
        if opts.load_pipeline:
            client.set_pipeline(schema.p4info, device_config)
        try:
            client.write_rules(schema, "insert", rules.rules, batch_size=opts.batch_size, atomic=opts.atomic,
                               progress=(lambda k: progress.advance(sw.name, k)) if progress else None)
        except P4ClientError as err:
            state = "rolled back" if err.rolled_back else f"{len(err.in_effect)} of {n} in effect"
            first = err.errors[0] if err.errors else None
            msg = f"{err.code}: update #{first.index}: {first.message}" if first else str(err)
            return SwitchReport(sw.name, 0 if err.rolled_back else len(err.in_effect), time.monotonic() - t0,
                                f"{msg} ({state})")
    return SwitchReport(sw.name, n, time.monotonic() - t0)


def _run_all(topo: Topology, work: Callable[[Switch], SwitchReport], opts: InstallOptions,
             progress: MultiProgress | None) -> list[SwitchReport]:
    reports: list[SwitchReport] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(opts.workers, len(topo.switches)))) as pool:
        futures = {pool.submit(work, sw): sw for sw in topo.switches}
        for fut in concurrent.futures.as_completed(futures):
            sw = futures[fut]
            try:
                rep = fut.result()
            except MlfabricError as exc:
                rep = SwitchReport(sw.name, 0, 0.0, str(exc))
            reports.append(rep)
            if progress:
                progress.finish(sw.name, "ok" if rep.error is None else f"FAILED: {rep.error}")
    return sorted(reports, key=lambda r: r.switch)


def install_fabric(topo: Topology, addresses: Mapping[str, str] | None = None, *,
                   options: InstallOptions | None = None, progress: MultiProgress | None = None) -> list[SwitchReport]:
    """Load pipelines and install every compiled entry on every switch, concurrently."""
    opts = options or InstallOptions()
    compiled = compile_fabric(topo)
    return _run_all(topo, lambda sw: _install_one(sw, compiled[sw.name], addresses, opts, progress), opts, progress)


def _read_rules(client: P4RuntimeClient, schema: P4Schema):
    return client.read_rules(schema)


def diff_fabric(topo: Topology, addresses: Mapping[str, str] | None = None, *,
                options: InstallOptions | None = None) -> list[SwitchReport]:
    """Compare each switch's entries with the compiled ones (nothing is written)."""
    opts = options or InstallOptions()
    compiled = compile_fabric(topo)

    def one(sw: Switch) -> SwitchReport:
        t0 = time.monotonic()
        schema, _ = pipeline_schema(sw.program)
        with _connect(sw, addresses, opts) as client:
            d = diff_rules(compiled[sw.name].rules, _read_rules(client, schema))
        return SwitchReport(sw.name, len(compiled[sw.name].rules), time.monotonic() - t0, None, d)

    return _run_all(topo, one, opts, None)


def sync_fabric(topo: Topology, addresses: Mapping[str, str] | None = None, *,
                options: InstallOptions | None = None, progress: MultiProgress | None = None) -> list[SwitchReport]:
    """Make every switch hold exactly the compiled entries: delete extra, modify changed,
    insert missing; a switch without a pipeline (after a restart) gets it loaded first."""
    opts = options or InstallOptions()
    compiled = compile_fabric(topo)

    def one(sw: Switch) -> SwitchReport:
        t0 = time.monotonic()
        schema, device_config = pipeline_schema(sw.program)
        with _connect(sw, addresses, opts) as client:
            try:
                actual = _read_rules(client, schema)
            except P4ClientError as err:
                if err.code != "FAILED_PRECONDITION":
                    raise
                client.set_pipeline(schema.p4info, device_config)
                actual = []
            d = diff_rules(compiled[sw.name].rules, actual)
            ups = sync_updates(schema, d)
            if progress:
                progress.set_total(sw.name, len(ups))
            if ups:
                client.write_checked(ups, batch_size=opts.batch_size, atomic=opts.atomic)
            if progress:
                progress.advance(sw.name, len(ups))
        return SwitchReport(sw.name, len(ups), time.monotonic() - t0, None, d)

    return _run_all(topo, one, opts, progress)
