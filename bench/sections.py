"""The sections of ``make bench``: each a function of a :class:`Context` that measures one
part of the project and returns its rows (:func:`row`). ``make bench BENCH=NAME`` runs one.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.errors import MlfabricError

__all__ = ["OPT_IN", "SECTIONS", "Context", "row", "run_sections"]


@dataclass(frozen=True, kw_only=True)
class Context:
    """What every section may ask: shorter runs, whether it runs as root and with BMv2."""

    quick: bool = False
    root: bool = False
    bmv2: bool = False

    @property
    def secs(self) -> float:
        return 1.0 if self.quick else 3.0

    @property
    def samples(self) -> int:
        return 500 if self.quick else 2000

    @classmethod
    def of_machine(cls, quick: bool) -> Context:
        return cls(quick=quick, root=os.geteuid() == 0, bmv2=shutil.which("simple_switch_grpc") is not None)


def row(name: str, unit: str, python: float, bmv2: float | None, goal: str) -> dict:
    """One figure: the Python target's, BMv2's measured in the same run, their ratio, the goal."""
    ratio = (python / bmv2) if bmv2 else None
    return {"figure": name, "unit": unit, "python": python, "bmv2": bmv2, "python_over_bmv2": ratio, "goal": goal}


def _compiler() -> bool:
    from pybmv2.native.build import compiler

    return compiler() is not None


def compile_section(ctx: Context) -> list[dict]:
    rows: list[dict] = []
    print("[bench] rule compilation and TotientPerms at scale ...", flush=True)
    from bench import compile_bench

    comp = compile_bench.rail_only_16k()
    rows.append(row(f"compile rail-only 16,384 GPUs ({comp['entries']:,} entries)", "s", comp["compile_s"] + comp["generate_s"],
                     None, "< 10 s"))
    rows.append(row("compile rail-only 16,384 GPUs: peak memory", "MB", comp["peak_mb"], None, "< 2,000 MB"))
    tp = compile_bench.totient_4096()
    rows.append(row(f"TotientPerms n=4,096 d=8 (diameter {tp['diameter']})", "s", tp["seconds"], None, "< 1 s"))
    return rows


def forwarding_section(ctx: Context) -> list[dict]:
    from bench import forwarding, p4runtime_bench

    rows: list[dict] = []
    print("[bench] in-process forwarding ...", flush=True)
    inproc = forwarding.inprocess_rate(ctx.secs)
    rows.append(row("in-process forwarding, rail_switch, 1k LPM routes", "packets/s",
                     inproc["packets_per_s"], None, ">= 20,000"))
    if _compiler():
        print("[bench] native engine: batch API and build times ...", flush=True)
        from bench import native_bench

        nat = native_bench.batch_rate(ctx.secs)
        rows.append(row("native engine, batch API, rail_switch, 1k LPM routes", "packets/s",
                         nat["packets_per_s"], None, ">= 1,000,000"))
        rows.append(row("native engine / Python engine, in process", "x",
                         nat["packets_per_s"] / inproc["packets_per_s"], None, "report"))
        bt = native_bench.build_times()
        rows.append(row("native engine for rail_switch: C compiler run (cold cache)", "ms",
                         1000 * bt["cold_s"], None, "report"))
        rows.append(row("native engine for rail_switch: from the cache (warm)", "ms",
                         1000 * bt["warm_s"], None, "report"))
    else:
        print("[bench] native engine figures skipped: no C compiler")
    if not ctx.root:
        print("[bench] process mode skipped: veths need root")
        return rows
    print("[bench] veth baseline ...", flush=True)
    base = forwarding.veth_baseline(500 if ctx.quick else 2000)
    print("[bench] process mode over veth: python ...", flush=True)
    py = forwarding.process_mode("python-process", ctx.secs, ctx.samples)
    bm = None
    if ctx.bmv2:
        print("[bench] process mode over veth: bmv2 ...", flush=True)
        bm = forwarding.process_mode("bmv2", ctx.secs, ctx.samples)
    rows.append(row("process mode over veth", "packets/s", py["packets_per_s"],
                     bm["packets_per_s"] if bm else None, ">= 0.5 x BMv2"))
    for q in ("p50", "p99"):
        rows.append(row(f"added latency per hop, {q}", "us", py[f"{q}_us"] - base[f"{q}_us"],
                         (bm[f"{q}_us"] - base[f"{q}_us"]) if bm else None, "report"))
    if _compiler():
        print("[bench] over veth with a C traffic source: native, python, bmv2, a bridge ...",
              flush=True)
        from bench import veth_rate

        vn = veth_rate.switch_rate("python-process", "native", ctx.secs, ctx.samples)
        vp = veth_rate.switch_rate("python-process", "python", ctx.secs, ctx.samples)
        vb = veth_rate.switch_rate("bmv2", None, ctx.secs, ctx.samples) if ctx.bmv2 else None
        br = veth_rate.bridge_rate(ctx.secs)
        rows.append(row("veth, C source, 1k routes: native engine", "packets/s",
                         vn["packets_per_s"], vb["packets_per_s"] if vb else None,
                         ">= 10 x BMv2"))
        rows.append(row("veth, C source, 1k routes: Python engine", "packets/s",
                         vp["packets_per_s"], vb["packets_per_s"] if vb else None, "report"))
        rows.append(row("veth, C source: a Linux bridge, no switch", "packets/s",
                         br["packets_per_s"], None, "the kernel's own forwarding"))
        rows.append(row("native engine / Linux bridge", "x", vn["packets_per_s"] / br["packets_per_s"],
                         None, "report"))
        for q, goal in (("p50", "< 20 us"), ("p99", "< 100 us")):
            rows.append(row(f"added latency per hop, native engine, {q}", "us",
                             vn[f"{q}_us"] - base[f"{q}_us"],
                             (vb[f"{q}_us"] - base[f"{q}_us"]) if vb else None, goal))
        rows.append(row("... the worst probe, send to arrival", "us", vn["max_us"], vb["max_us"] if vb else None,
                         "report"))
        rows.append(row("... the switch's CPU while probing (one frame at a time)", "% of a core",
                         100 * vn["probe_cpu_share"], 100 * vb["probe_cpu_share"] if vb else None, "report"))
        busy = veth_rate.switch_rate("python-process", "native", ctx.secs, ctx.samples,
                                     extra_args=("--busy-poll-us", "200"), blast_too=False)
        for q in ("p50", "p99"):
            rows.append(row(f"the same with --busy-poll-us 200, {q}", "us", busy[f"{q}_us"] - base[f"{q}_us"],
                             None, "report"))
        rows.append(row("... the worst probe", "us", busy["max_us"], None, "report"))
        rows.append(row("... the switch's CPU while probing", "% of a core", 100 * busy["probe_cpu_share"], None,
                         "report (the cost of polling)"))
        nl = p4runtime_bench.native_load(3 if ctx.quick else 5)
        rows.append(row("native: process start to rail_switch loaded, warm cache", "s",
                         nl["warm_s"], None, "< 0.5 s"))
        for phase, ms in nl["phases"].items():  # where the warm start's time goes
            rows.append(row(f"... {phase}", "ms", ms, None, "report"))
        rows.append(row("native: process start to rail_switch loaded, cold cache", "s",
                         nl["cold_s"], None, "report (the C compiler runs)"))
        for phase in ("native: C generation", "native: C compiler"):
            if phase in nl["cold_phases"]:
                rows.append(row(f"... {phase} (cold)", "ms", nl["cold_phases"][phase], None, "report"))
    return rows


def byte_cost_section(ctx: Context) -> list[dict]:
    rows: list[dict] = []
    print("[bench] CPU per emulated gigabyte: bulk TCP through one switch, MTU 1500 and 9000 ...", flush=True)
    from bench import byte_cost

    mb = 60 if ctx.quick else 300
    for mtu in (1500, 9000):
        costs = {"native engine": byte_cost.byte_cost("python", "native", mtu, mb),
                 "Python engine": byte_cost.byte_cost("python", "python", mtu, mb // 3)}
        bm_cost = byte_cost.byte_cost("bmv2", None, mtu, mb) if ctx.bmv2 else None
        costs["Linux bridge"] = byte_cost.bridge_byte_cost(mtu, mb)
        for name, c in costs.items():
            rows.append(row(f"MTU {mtu}, {name}: machine CPU per GB delivered ({c['goodput_mbps']:.0f} Mbit/s)",
                             "CPU-s/GB", c["machine_cpu_s_per_gb"],
                             bm_cost["machine_cpu_s_per_gb"] if bm_cost and name != "Linux bridge" else None,
                             "report (lower is better)"))
            if name != "Linux bridge":
                rows.append(row(f"MTU {mtu}, {name}: the switch's own CPU per GB", "CPU-s/GB",
                                 c["switch_cpu_s_per_gb"], bm_cost["switch_cpu_s_per_gb"] if bm_cost else None,
                                 "report"))
    return rows


def main_job_section(ctx: Context) -> list[dict]:
    rows: list[dict] = []
    print("[bench] the main job: CPU per emulated GB of the all-to-all, the highest rate it holds at ...",
          flush=True)
    from bench import collective_cost
    from controller.experiments.rail_only import ExperimentConfig

    base = ExperimentConfig().rate_mbps  # make run's default
    search = collective_cost.highest_decided_rate((base, 2 * base) if ctx.quick else (base, 2 * base, 4 * base),
                                                  engine="native")
    for t in search["tried"]:
        rows.append(row(f"make run's fabric at {t['rate_mbps']:g} Mbit/s: the busiest collective's machine share",
                         "%", 100 * t["machine_max"], None,
                         "< 60%" + (f" (broke: {t['breach']})" if t["breach"] else "")))
    best = search["highest_rate_mbps"]
    rows.append(row("the highest NIC rate make run's fabric holds within the fidelity limits", "Mbit/s",
                     float(best or 0), None,
                     ">= 400 Mbit/s" + ("" if best and best >= 400 else " (not reached: docs/benchmarks.md)")))
    _cost_rows(rows, {f"native engine, MTU 9000, {base:g} Mbit/s": search["tried"][0]["alltoall_cost"]}, None, "")
    return rows


def engines_section(ctx: Context) -> list[dict]:
    """The main job's all-to-all by engine and frame size (about 10 minutes: not in the
    default run, ``make bench BENCH=engines``)."""
    from controller.experiments.rail_only import ExperimentConfig

    rows: list[dict] = []
    print("[bench] the main job's all-to-all by engine and frame size ...", flush=True)
    costs: dict[str, dict[str, dict[str, float]]] = {}
    # the engines and frame sizes compared at a quarter of make run's rate, which all of them
    # carry (the Python engine and BMv2 do not keep up with 100 Mbit/s on 2 cores)
    slow = ExperimentConfig().rate_mbps / 4
    variants = {
        f"native engine, MTU 9000, {slow:g} Mbit/s": {"engine": "native"},
        f"native engine, MTU 1500, {slow:g} Mbit/s": {"engine": "native", "mtu": 1500},
        f"Python engine, MTU 9000, {slow:g} Mbit/s": {"engine": "python"}}
    for name, kwargs in variants.items():
        cost = _main_job_cost(name, slow, rows, **kwargs)
        if cost is not None:
            costs[name] = cost
    bm_a2a = _main_job_cost("BMv2, MTU 9000", slow, rows, target="bmv2", extra=("--super-frames", "0")) \
        if ctx.bmv2 else None
    _cost_rows(rows, costs, bm_a2a, f"MTU 9000, {slow:g} Mbit/s")
    return rows


def _cost_rows(rows: list[dict], costs: dict[str, dict[str, dict[str, float]]],
               bm_a2a: dict[str, dict[str, float]] | None, bmv2_beside: str) -> None:
    for name, cost in costs.items():
        for fabric, c in cost.items():
            theirs = bm_a2a.get(fabric) if bm_a2a and name.endswith(bmv2_beside) else None
            rows.append(row(f"all-to-all, {fabric}, {name}: machine CPU per GB", "CPU-s/GB",
                             c["machine_cpu_s_per_gb"], theirs["machine_cpu_s_per_gb"] if theirs else None,
                             "report (lower is better)"))
            for part in ("workers", "switches", "rest"):
                rows.append(row(f"... of which {part}" + (" (kernel: TCP, veths, shaping)" if part == "rest" else ""),
                                 "CPU-s/GB", c[f"{part}_cpu_s_per_gb"],
                                 theirs[f"{part}_cpu_s_per_gb"] if theirs else None, "report"))


def _main_job_cost(name: str, rate: float, rows: list[dict], **kwargs: Any) -> dict[str, dict[str, float]] | None:
    """The all-to-all's cost (bench.collective_cost) of make run's experiment at ``rate`` with
    ``kwargs``; a run that fails is a row saying so, not the end of the section."""
    from bench import collective_cost

    try:
        return collective_cost.alltoall_cost(*collective_cost.run_main_job(rate, **kwargs))
    except RuntimeError as exc:
        print(f"[bench] the main job, {name}: {exc}", flush=True)
        rows.append(row(f"all-to-all, {name}: failed ({exc})", "-", math.nan, None, "report"))
        return None


def reads_section(ctx: Context) -> list[dict]:
    rows: list[dict] = []
    print("[bench] forwarding and Writes during a 65,536-entry wildcard Read ...", flush=True)
    from bench import read_stall

    reads = 2
    rs_py = read_stall.read_stall("python-process", reads=reads, engine="python")
    rs_bm = read_stall.read_stall("bmv2", reads=reads) if ctx.bmv2 else None
    for q, goal in (("p50", "report"), ("p99", "< 5,000 us")):
        rows.append(row(f"latency added during a 65,536-entry Read, {q}", "us", 1e3 * rs_py[f"added_{q}_ms"],
                         1e3 * rs_bm[f"added_{q}_ms"] if rs_bm else None, goal))
    if _compiler():
        print("[bench] native engine: forwarding during a Read that pulls 65,536 entries' counts ...",
              flush=True)
        rs_nat = read_stall.read_stall("python-process", reads=reads, engine="native", counters=True,
                                       touch_all=True)
        for q in ("p50", "p99"):
            rows.append(row(f"native engine: idle latency, {q}", "us", 1e3 * rs_nat[f"idle_{q}_ms"],
                             None, "report"))
            rows.append(row(f"native: latency added during a Read of 65,536 entries with counters, "
                             f"every entry counted before it, {q}", "us", 1e3 * rs_nat[f"added_{q}_ms"],
                             None, "report (no stall: the pull takes no lock)"))
        rows.append(row("native: the worst probe during those Reads", "us", 1e3 * rs_nat["read_max_ms"],
                         None, "report"))
        rows.append(row("native: entries with a count in the Read", "entries", rs_nat["entries_counted_max"],
                         None, "65,536"))
    rows.append(row("one-entry Write, idle, median", "ms", rs_py["write_idle_ms_median"],
                     rs_bm["write_idle_ms_median"] if rs_bm else None, "report"))
    rows.append(row("one-entry Write during the Read, median", "ms", rs_py["write_during_read_ms_median"],
                     rs_bm["write_during_read_ms_median"] if rs_bm else None, "report"))
    rows.append(row("one-entry Write during the Read, worst", "ms", rs_py["write_during_read_ms_max"],
                     rs_bm["write_during_read_ms_max"] if rs_bm else None, "report"))
    rows.append(row("wildcard Read of 65,536 entries, median", "s", rs_py["read_s_median"],
                     rs_bm["read_s_median"] if rs_bm else None, "report"))
    rows += idle_sweep_rows(ctx)
    return rows


def idle_sweep_rows(ctx: Context) -> list[dict]:
    from bench import idle_sweep

    print("[bench] idle-timeout sweeps of 65,536 entries ...", flush=True)
    rows: list[dict] = []
    py, nat = idle_sweep.sweep_time("python"), idle_sweep.sweep_time("native")
    rows.append(row("idle-timeout sweep of 65,536 entries, Python engine / native engine (in process)", "ms",
                     1e3 * py["sweep_s_median"], None, "report"))
    rows.append(row("... native engine (its hit times pulled first)", "ms", 1e3 * nat["sweep_s_median"], None,
                     "report"))
    seconds = 2.0 if ctx.quick else 3.0
    lat_nat = idle_sweep.sweep_latency("python-process", "native", seconds)
    lat_py = idle_sweep.sweep_latency("python-process", "python", seconds)
    lat_bm = idle_sweep.sweep_latency("bmv2", None, seconds) if ctx.bmv2 else None
    for label, lat in (("native engine", lat_nat), ("Python engine", lat_py)):
        for state in ("empty", "full"):
            b = lat_bm[state] if lat_bm else None
            rows.append(row(f"forwarding beside sweeps, flow cache {state}, {label}: p99", "us", lat[state]["p99_us"],
                             b["p99_us"] if b else None, "report"))
            rows.append(row("... the worst probe", "us", lat[state]["max_us"], b["max_us"] if b else None,
                             "full no worse than empty"))
    return rows


def fabric_section(ctx: Context) -> list[dict]:
    rows: list[dict] = []
    print("[bench] 16-switch fabric bring-up ...", flush=True)
    from bench import fabric_bringup

    runs = 1 if ctx.quick else 3
    fb_py = fabric_bringup.bring_up("python", runs)
    fb_bm = fabric_bringup.bring_up("bmv2", runs) if ctx.bmv2 else None
    rows.append(row("16-switch fabric: nothing to rules installed", "s", fb_py["bring_up_s"],
                     fb_bm["bring_up_s"] if fb_bm else None, "< 4 s"))
    rows.append(row("16-switch fabric: teardown", "s", fb_py["teardown_s"],
                     fb_bm["teardown_s"] if fb_bm else None, "< 2 s"))
    rows += _scale_rows(ctx)
    return rows


def _scale_rows(ctx: Context) -> list[dict]:
    from bench import fabric_bringup

    servers = fabric_bringup.SCALE_SERVERS[1::2] if ctx.quick else fabric_bringup.SCALE_SERVERS
    print(f"[bench] rail-only fabrics of {', '.join(str(8 * n) for n in servers)} GPUs ...", flush=True)
    py = fabric_bringup.scale_series("python", servers)
    bm = fabric_bringup.scale_series("bmv2", servers) if ctx.bmv2 else None
    rows: list[dict] = []
    for i, p in enumerate(py):
        b = bm[i] if bm else None
        gpus = f"{p['gpus']:,} GPUs"
        rows.append(row(f"rail-only {gpus}: nothing to rules installed", "s", p["bring_up_s"],
                         b["bring_up_s"] if b else None, "< 60 s" if p["gpus"] == 1024 else "report"))
        if i == len(py) - 1:  # where the largest one's time goes
            for part, what in (("build", "Mininet's nodes and links"), ("switches", "switch processes ready"),
                               ("hosts", "hosts' addresses and neighbours"), ("rules", "pipelines and rules")):
                rows.append(row(f"... {what}", "s", p[f"{part}_s"], b[f"{part}_s"] if b else None, "report"))
        rows.append(row(f"rail-only {gpus}: teardown", "s", p["teardown_s"], b["teardown_s"] if b else None,
                         "report"))
        rows.append(row(f"rail-only {gpus}: interfaces left after teardown", "interfaces", p["left_behind"],
                         b["left_behind"] if b else None, "0"))
        rows.append(row(f"rail-only {gpus}: switch processes' memory", "MB", p["switches_mb"],
                         b["switches_mb"] if b else None, "report"))
        rows.append(row(f"rail-only {gpus}: controller's memory", "MB", p["controller_mb"],
                         b["controller_mb"] if b else None, "report"))
    big, big_bm = py[-1], (bm[-1] if bm else None)
    rows.append(row(f"rail-only {big['gpus']:,} GPUs: rails answering a ping from the first server to the last",
                     "rails", big["rails_answered"], big_bm["rails_answered"] if big_bm else None,
                     f"{big['rails']} of {big['rails']}"))
    rows.append(row("... the slowest of those pings' round trips", "ms", big["worst_rtt_ms"],
                     big_bm["worst_rtt_ms"] if big_bm else None, "report"))
    tail = [p for p in py if p["gpus"] >= 256]
    if len(tail) >= 2:
        fit = fabric_bringup.growth_exponent
        sizes = [p["gpus"] for p in tail]
        bm_tail = [b for b in (bm or []) if b["gpus"] >= 256]
        rows.append(row("bring-up growth from 256 GPUs (time ~ GPUs^b), b", "b",
                         fit(sizes, [p["bring_up_s"] for p in tail]),
                         fit(sizes, [b["bring_up_s"] for b in bm_tail]) if bm_tail else None, "<= 1 (linear)"))
        rows.append(row("teardown growth from 256 GPUs, b", "b", fit(sizes, [p["teardown_s"] for p in tail]),
                         fit(sizes, [b["teardown_s"] for b in bm_tail]) if bm_tail else None, "<= 1 (linear)"))
    return rows


def optical_section(ctx: Context) -> list[dict]:
    rows: list[dict] = []
    print("[bench] schedule install on a 16-switch optical fabric ...", flush=True)
    from bench import schedule_bench

    sc_py = schedule_bench.schedule_install("python")
    sc_bm = schedule_bench.schedule_install("bmv2") if ctx.bmv2 else None
    rows.append(row(f"schedule install, 16 switches ({sc_py['entries']:,} entries)", "s", sc_py["install_s"],
                     sc_bm["install_s"] if sc_bm else None, "report"))
    rows.append(row("schedule skew bound, worst of 16 switches", "us", sc_py["worst_skew_us"],
                     sc_bm["worst_skew_us"] if sc_bm else None, "< 1,000 us"))
    print("[bench] shortest usable slice (round-robin, 4 racks) ...", flush=True)
    sl_py = schedule_bench.shortest_slice("python")
    sl_bm = schedule_bench.shortest_slice("bmv2") if ctx.bmv2 else None
    rows.append(row("shortest slice with >= 90% of each day usable", "ms", sl_py["shortest_slice_ms"],
                     sl_bm["shortest_slice_ms"] if sl_bm else None, "<= 10 ms (OpenOptics Mininet: 32 ms)"))
    for ms in (5, 2):
        rows.append(row(f"usable share of a {ms} ms day", "%", 100 * sl_py[f"usable_at_{ms}ms"],
                         100 * sl_bm[f"usable_at_{ms}ms"] if sl_bm else None, "report"))
    print("[bench] consistent reconfiguration of a 16-switch optical fabric under load ...", flush=True)
    from bench import reconfigure_bench

    rc_py = reconfigure_bench.reconfigure_timing("python", 3)
    rc_bm = reconfigure_bench.reconfigure_timing("bmv2", 3) if ctx.bmv2 else None
    rows.append(row("reconfigure call to last of 16 acks (open session), median", "ms",
                     rc_py["committed_ms_median"], rc_bm["committed_ms_median"] if rc_bm else None, "< 50 ms"))
    rows.append(row("reconfigure call to last of 16 acks (open session), worst", "ms",
                     rc_py["committed_ms_worst"], rc_bm["committed_ms_worst"] if rc_bm else None, "report"))
    rows.append(row("... connecting and probing first (mlfabric reconfigure)", "ms", rc_py["cold_committed_ms"],
                     rc_bm["cold_committed_ms"] if rc_bm else None, "report"))
    rows.append(row(f"packets lost, path moved under 1,000 packets/s ({rc_py['runs']} runs)", "packets",
                     rc_py["lost_total"], rc_bm["lost_total"] if rc_bm else None,
                     "0 (BMv2: no calendar queue, the guard's packets drop)"))
    print("[bench] calendar queues: rack 0 -> rack 1 through a strobe ...", flush=True)
    for cq in (False, True):
        ce = schedule_bench.calendar_effect(cq)
        label = "with calendar queues" if cq else "without calendar queues (BMv2 semantics)"
        rows.append(row(f"delivered of {ce['sent']} sent, {label}", "packets", ce["delivered"], None,
                         "report"))
        rows.append(row(f"dropped at the ToR, {label}", "packets", ce["dropped_at_tor"], None, "report"))
    rows += cleanup_rows(ctx)
    return rows


def cleanup_rows(ctx: Context) -> list[dict]:
    from bench import cleanup_bench

    print("[bench] a reconfiguration's clean-up (66,000 entries) against forwarding ...", flush=True)
    nat = cleanup_bench.cleanup_sweep("python-process", "native", cleanup_bench.SETTINGS[:1])
    bm = cleanup_bench.cleanup_sweep("bmv2", None, cleanup_bench.SETTINGS[:1]) if ctx.bmv2 else None
    rows: list[dict] = []
    for i, r in enumerate(nat):
        b = bm[i] if bm else None
        if r["batch"] == 0:
            rows.append(row("forwarding latency beside an idle controller, p99 / worst (native engine)", "us",
                             r["p99_us"], b["p99_us"] if b else None, "report"))
            continue
        what = f"clean-up of an Opera ToR's old version, batches of {r['batch']:,}" + (
            f" {1e3 * r['pause_s']:g} ms apart" if r["pause_s"] else ", no pause")
        rows.append(row(what, "s", r["seconds"], b["seconds"] if b else None,
                         "< 20 s" if r["batch"] == 256 else "report"))
        rows.append(row("... forwarding latency during it, p50", "us", r["p50_us"], b["p50_us"] if b else None, "report"))
        rows.append(row("... p99", "us", r["p99_us"], b["p99_us"] if b else None, "report"))
        rows.append(row("... the worst probe", "us", r["max_us"], b["max_us"] if b else None, "report"))
    return rows


def tdtcp_section(ctx: Context) -> list[dict]:
    rows: list[dict] = []
    if ctx.root:
        print("[bench] TDTCP: notification latency (ticks only, 20 ms TDNs) ...", flush=True)
        from bench import tdtcp_bench

        nl_py = tdtcp_bench.notification_latency("python")
        nl_bm = tdtcp_bench.notification_latency("bmv2") if ctx.bmv2 else None
        for q in ("p50", "p99"):
            rows.append(row(f"TDN change to the host's ICMP type 7, {q}", "us", nl_py[f"{q}_us"],
                             nl_bm[f"{q}_us"] if nl_bm else None, "< one TDN day (20,000 us)"))
        rows.append(row(f"TDN changes announced, of {nl_py['changes']}", "changes", nl_py["notified"],
                         nl_bm["notified"] if nl_bm else None, "all"))
    print("[bench] TDTCP transport vs kernel TCP over loopback ...", flush=True)
    from bench import tdtcp_bench as _tdtcp

    tv = _tdtcp.transport_vs_kernel_tcp(5.0 if ctx.quick else 20.0)
    rows.append(row("TDTCP transport goodput / kernel TCP's, loopback, 1444-byte segments", "x", tv["ratio"], None,
                     "report (Python: ~15 us per segment)"))
    return rows


def checkmate_section(ctx: Context) -> list[dict]:
    rows: list[dict] = []
    print("[bench] Checkmate: shadow receive path, forwarding with mirroring on vs off ...", flush=True)
    from bench import checkmate_bench

    sh = checkmate_bench.shadow_receive(8.0 if ctx.quick else 32.0)
    rows.append(row("shadow receive path (parse, reassemble, assemble)", "MB/s", sh["mb_per_s"], None,
                     ">= 50 MB/s"))
    rows.append(row("shadow receive path / copying the payloads", "x", sh["mb_per_s"] / sh["baseline_mb_per_s"],
                     None, "report"))
    mf = checkmate_bench.mirror_forwarding(ctx.secs)
    rows.append(row("in-process forwarding, every packet mirrored", "packets/s", mf["on"], None, "report"))
    rows.append(row("forwarding rate, mirroring on / off", "x", mf["ratio"], None,
                     "report (~0.5: each copy is a second egress pass)"))
    if ctx.root:
        mp_py = checkmate_bench.mirror_process_mode("python-process", ctx.secs)
        mp_bm = checkmate_bench.mirror_process_mode("bmv2", ctx.secs) if ctx.bmv2 else None
        rows.append(row("process mode over veth, every packet mirrored", "packets/s", mp_py["on"],
                         mp_bm["on"] if mp_bm else None, "report"))
        rows.append(row("process mode, mirroring on / off", "x", mp_py["ratio"],
                         mp_bm["ratio"] if mp_bm else None, "report"))
    return rows


def aggregation_section(ctx: Context) -> list[dict]:
    rows: list[dict] = []
    print("[bench] in-network aggregation: requests against plain forwarding ...", flush=True)
    from bench import aggregation_bench

    ag_py = aggregation_bench.process_mode("python-process", ctx.secs)
    ag_bm = aggregation_bench.process_mode("bmv2", ctx.secs) if ctx.bmv2 else None
    rows.append(row("process mode, aggregation requests (64 lanes, each round complete)", "packets/s",
                     ag_py["aggregation"], ag_bm["aggregation"] if ag_bm else None, "report"))
    rows.append(row("process mode, aggregation / plain forwarding of the same frames", "x", ag_py["ratio"],
                     ag_bm["ratio"] if ag_bm else None, "report (the cost of 64 lanes of registers)"))
    return rows


def p4runtime_section(ctx: Context) -> list[dict]:
    from bench import p4runtime_bench

    rows: list[dict] = []
    print("[bench] P4Runtime start-up and writes ...", flush=True)
    su_py = p4runtime_bench.startup("python", 2 if ctx.quick else 5, engine="python")
    su_bm = p4runtime_bench.startup("bmv2", 2 if ctx.quick else 5) if ctx.bmv2 else None
    rows.append(row("process start to arbitration", "s", su_py["arbitration_s_median"],
                     su_bm["arbitration_s_median"] if su_bm else None, "< 0.5 s"))
    targets: dict[str, tuple[str, str | None]] = {"python": ("python", "python")}
    if _compiler():
        targets["native"] = ("python", "native")
    if ctx.bmv2:
        targets["bmv2"] = ("bmv2", None)
    rates = p4runtime_bench.write_rates(targets, singles=300 if ctx.quick else 1000,
                                        repeats=2 if ctx.quick else 3)
    bm = rates.get("bmv2")
    for kind in p4runtime_bench.WRITE_TABLES:
        for engine in ("python", "native"):
            if engine not in rates:
                continue
            label = "" if engine == "python" else ", native engine"
            rows.append(row(f"table writes, {kind}, batches of 1,000{label}", "entries/s",
                             rates[engine].batched[kind], bm.batched[kind] if bm else None, ">= BMv2"))
            rows.append(row(f"table writes, {kind}, one per RPC{label}", "entries/s",
                             rates[engine].single[kind], bm.single[kind] if bm else None, ">= BMv2"))
    py = rates["python"]
    rows.append(row("batched / one-per-RPC speed-up, LPM", "x", py.batched["lpm"] / py.single["lpm"],
                     bm.batched["lpm"] / bm.single["lpm"] if bm else None, ">= 5x"))
    for engine in ("python", "native"):
        if engine in rates:
            label = "" if engine == "python" else ", native engine"
            rows.append(row(f"resident memory with 10,000 entries{label}", "MB",
                             rates[engine].rss_mb_with_entries, bm.rss_mb_with_entries if bm else None,
                             "< 80 MB"))
    return rows


def data_path_section(ctx: Context) -> list[dict]:
    """What an emulated byte costs make run's workload, the old data path against the new
    one in the same run (bench.data_path)."""
    from bench import data_path

    print("[bench] make run's workload: CPU per emulated GB, frames and loopback NVLink vs super-packets and "
          "paced NVLink ...", flush=True)
    return data_path.section_rows(data_path.compare(quick=ctx.quick), row)


def cluster_section(ctx: Context) -> list[dict]:
    """A link between machines (a VXLAN tunnel between two stand-ins) against the same link on
    one machine, in the same run (bench.cluster_bench)."""
    from bench import cluster_bench

    print("[bench] a link between machines: TCP through a tunnel between two stand-ins vs a veth ...", flush=True)
    return cluster_bench.section_rows(cluster_bench.compare(quick=ctx.quick), row)


#: every section, in the order ``make bench`` runs them: (needs root, function)
SECTIONS: dict[str, tuple[bool, Callable[[Context], list[dict]]]] = {
    "compile": (False, compile_section),
    "forwarding": (False, forwarding_section),
    "byte-cost": (True, byte_cost_section),
    "data-path": (True, data_path_section),
    "main-job": (True, main_job_section),
    "reads": (True, reads_section),
    "fabric": (True, fabric_section),
    "optical": (True, optical_section),
    "tdtcp": (False, tdtcp_section),
    "checkmate": (False, checkmate_section),
    "aggregation": (True, aggregation_section),
    "cluster": (True, cluster_section),
    "p4runtime": (False, p4runtime_section),
    "engines": (True, engines_section),
}
#: sections that run only when named (``make bench BENCH=NAME``): the whole run stays
#: within 15 minutes on 2 cores without them
OPT_IN = ("engines",)


def run_sections(ctx: Context, names: list[str]) -> list[dict]:
    """The rows of the sections named (every one when none is), each timed; a section that
    needs root is skipped, saying why, without it."""
    rows: list[dict] = []
    for name in names or [n for n in SECTIONS if n not in OPT_IN]:
        needs_root, section = SECTIONS[name]
        if needs_root and not ctx.root:
            print(f"[bench] section {name} skipped: it needs root (veths, Mininet)")
            continue
        t0 = time.monotonic()
        try:
            rows += section(ctx)
        except (RuntimeError, OSError, MlfabricError) as exc:  # one broken section keeps the others' rows
            print(f"[bench] section {name} FAILED after {time.monotonic() - t0:.0f} s: {exc}", flush=True)
            rows.append(row(f"section {name}: failed ({exc})", "-", math.nan, None, "runs"))
            continue
        print(f"[bench] section {name}: {time.monotonic() - t0:.0f} s", flush=True)
    return rows
