"""``mlfabric experiment run tdtcp``: a bulk transfer between two racks whose connection
alternates between a fast and a slow time-division network, with each transport; one
results folder (controller.experiments.tdtcp is the pure side).

Per repetition: build the fabric (two circuit switches taking turns, the ToRs holding what
waits on the Python target), install the schedule, tell every host of both racks about TDN
changes and start the controller's ticks; then, one after another, a transfer with the
per-TDN transport, with the same transport on one shared state, and with kernel TCP CUBIC
(iperf3). Results: results.json (with the engine each switch ran), runs.csv, table.txt,
tdtcp.png, and each repetition's switch logs in logs/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mlfabric_emulation.cpu_sampler import fabric_cpu_sampler
from mlfabric_emulation.fabric_net import EmulatedFabric, check_free
from mlfabric_emulation.switch_engines import engines_text, fabric_engines

from controller.errors import ConfigError, MlfabricError
from controller.experiments.core import (
    finish,
    refuse,
    results_folder,
    run_units,
    write_outcome,
)
from controller.experiments.cpu_use import cpu_row, cpu_summary, cpu_verdict
from controller.experiments.options import add_common_options, experiment_parser
from controller.experiments.regime import from_probe
from controller.experiments.results import (
    config_json,
)
from controller.experiments.tdtcp import (
    TRANSPORTS,
    Tdn,
    TdtcpConfig,
    capacity_mbps,
    fabric,
    goodput_mbps,
    schedule,
    switch_args,
)
from controller.experiments.tdtcp_report import notification_latencies, report, verdicts
from controller.tdtcp.install import install_notifications
from controller.tdtcp.ticker import Ticker
from mlfabric_base.numbers import nonnegative_float, parse_finite, positive_float

__all__ = ["main"]

SENDER, RECEIVER, DST = "h0_0", "h1_0", "10.200.1.1"


def _say(msg: str) -> None:
    print(f"[tdtcp] {msg}", flush=True)


def _tdn(text: str) -> Tdn:
    rate, sep, delay = text.partition("/")
    try:
        return Tdn(parse_finite(rate), int(delay) if sep else 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad TDN {text!r}: expected RATE_MBPS/DELAY_US") from None


def build_parser() -> argparse.ArgumentParser:
    p = experiment_parser("tdtcp", __doc__)
    add_common_options(p, "tdtcp", repetitions=3)
    p.add_argument("--seconds", type=positive_float, default=8.0, help="length of each transfer")
    p.add_argument("--day-ms", type=positive_float, default=20.0, help="how long each TDN's circuit holds")
    p.add_argument("--gap-ms", type=nonnegative_float, default=1.0, help="darkness between the TDNs")
    p.add_argument("--fast", type=_tdn, default=Tdn(40.0, 500), help="the fast TDN: RATE_MBPS/DELAY_US")
    p.add_argument("--slow", type=_tdn, default=Tdn(5.0, 2500), help="the slow TDN: RATE_MBPS/DELAY_US")
    p.add_argument("--transports", default=",".join(TRANSPORTS), help="among tdtcp, single, cubic")
    p.add_argument("--quick", action="store_true", help="1 repetition of 3 s (for tests)")
    return p


def parse_config(argv: list[str]) -> tuple[TdtcpConfig, Path | None, bool]:
    """The configuration, the results folder and whether the run must be decided."""
    a = build_parser().parse_args(argv)
    cfg = TdtcpConfig(target=a.target, engine=a.engine, repetitions=1 if a.quick else a.repetitions, seconds=3.0 if a.quick else a.seconds,
                      day_ms=a.day_ms, gap_ms=a.gap_ms, fast=a.fast, slow=a.slow,
                      transports=tuple(t for t in a.transports.split(",") if t))
    return cfg, a.out, a.require_decided


def _reap(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def _userspace(fab: EmulatedFabric, cfg: TdtcpConfig, mode: str, port: int) -> dict[str, Any]:
    """One transfer of ``cfg.seconds`` with the userspace transport (as iperf3 -t: more bytes
    than it can carry, stopped on time): what the sender and receiver report."""
    nbytes = int(4 * capacity_mbps(cfg) * 1e6 / 8 * cfg.seconds)
    procs: list[subprocess.Popen] = []
    try:
        recv = fab.host(RECEIVER).popen([sys.executable, "-m", "workloads.tdtcp", "recv", DST, "--port", str(port),
                                         "--idle", "2", "--wait", "20"],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(recv)
        assert recv.stderr is not None
        deadline = time.monotonic() + 10
        while "listening" not in recv.stderr.readline():
            if time.monotonic() > deadline or recv.poll() is not None:
                raise MlfabricError("the tdtcp receiver did not start")
        send = fab.host(SENDER).popen([sys.executable, "-m", "workloads.tdtcp", "send", DST, "--port", str(port),
                                       "--bytes", str(nbytes), "--seconds", f"{cfg.seconds:g}", "--mode", mode,
                                       "--listen-icmp", "--stats-ms", "10"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(send)
        try:
            out, err = send.communicate(timeout=cfg.seconds + 60)
        except subprocess.TimeoutExpired:
            send.kill()
            out, err = send.communicate()
            out = ""
            err = f"gave up after {cfg.seconds + 60:.0f} s"
        sender = json.loads(out) if out.strip() else {"error": err.strip()[-300:]}
        try:
            rout, _ = recv.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            rout = ""
        receiver = json.loads(rout) if rout.strip() else {}
    finally:
        _reap(procs)
    conns = receiver.get("connections") or [{}]
    delivered = conns[0].get("delivered", {"t": [], "bytes": []})
    start = sender.get("start", 0.0)
    samples = [(t - start, b) for t, b in zip(delivered["t"], delivered["bytes"], strict=True)]
    ran = not sender.get("error") and bool(sender.get("complete") or sender.get("time_limited"))
    return {"sender": sender, "samples": samples, "complete": ran, "goodput_mbps": goodput_mbps(samples),
            "error": sender.get("error")}


def _cubic(fab: EmulatedFabric, cfg: TdtcpConfig, port: int) -> dict[str, Any]:
    """One transfer with kernel TCP CUBIC (iperf3), samples from its 100 ms intervals."""
    procs: list[subprocess.Popen] = []
    try:
        server = fab.host(RECEIVER).popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)
        procs.append(server)
        time.sleep(0.5)
        client = fab.host(SENDER).popen(["iperf3", "-c", DST, "-p", str(port), "-t", f"{cfg.seconds:g}", "-i", "0.1",
                                         "-C", "cubic", "-J"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(client)
        out, err = client.communicate(timeout=cfg.seconds + 30)
    finally:
        _reap(procs)
    doc = json.loads(out) if out.strip() else {"error": err.strip()[-300:]}
    samples, total = [(0.0, 0)], 0
    for iv in doc.get("intervals", []):
        s = iv["sum"]
        total += int(s["bytes"])
        samples.append((float(s["end"]), total))
    return {"samples": samples, "complete": "error" not in doc, "goodput_mbps": goodput_mbps(samples),
            "error": doc.get("error")}


def run_repetition(cfg: TdtcpConfig, rep: int, log_dir: Path) -> list[dict[str, Any]]:
    """A fresh fabric (its switch logs in ``log_dir``) and one transfer per transport; a row
    per transfer, each with the engine every switch ran."""
    python = cfg.target == "python"
    sched = schedule(cfg)
    rows = []
    with EmulatedFabric(fabric(cfg), target=cfg.target, engine=cfg.engine, shape=True, publish=False, schedule=sched,
                        calendar_queues=python, switch_args=("--queue-depth", "256") if python else (),
                        switch_args_of=switch_args(cfg) if python else None, log_dir=log_dir) as fab:
        assert fab.live is not None and fab.schedule_epoch_us is not None
        engines = fabric_engines(cfg.target, fab.log_dir, [s.name for s in fab.topo.switches])
        _say(f"rep {rep + 1}: switches run the {engines_text(engines)}")
        install_notifications(fab.live, {"tor0": "all", "tor1": "all"})
        tors = [fab.live.switch("tor0"), fab.live.switch("tor1")]
        cpu = fabric_cpu_sampler(fab, [s.name for s in fab.topo.switches])
        with Ticker(tors, sched, fab.schedule_epoch_us) as ticker:
            for k, transport in enumerate(cfg.transports):
                t0 = time.monotonic()
                port = 6200 + 10 * rep + k
                with cpu.measure() as used:
                    run = _cubic(fab, cfg, port) if transport == "cubic" else _userspace(fab, cfg, transport, port)
                run.update(rep=rep, transport=transport, epoch_us=fab.schedule_epoch_us, **cpu_row(used[0]))
                rows.append(run)
                _say(f"rep {rep + 1} {transport}: {run['goodput_mbps']:.2f} Mb/s "
                     f"(capacity {capacity_mbps(cfg):.2f}){'' if run['complete'] else ', INCOMPLETE'} "
                     f"[{time.monotonic() - t0:.1f} s; {used[0].text()}]")
        for run in rows:
            run["ticks"] = ticker.sent
            run["engines"] = engines
    return rows


def main(argv: list[str]) -> int:
    try:
        cfg, out_arg, require_decided = parse_config(argv)
        check_free(fabric(cfg))  # before the results folder: a run refused for a busy machine leaves nothing
    except (MlfabricError, ConfigError) as exc:
        return refuse(exc)
    out = results_folder("tdtcp", out_arg, _say)
    _say(f"{cfg.target} target: TDN 0 {cfg.fast.rate_mbps:g} Mb/s + {cfg.fast.delay_us} us, TDN 1 "
         f"{cfg.slow.rate_mbps:g} Mb/s + {cfg.slow.delay_us} us, {cfg.day_ms:g} ms each, {cfg.gap_ms:g} ms gaps; "
         f"{', '.join(cfg.transports)} x {cfg.repetitions}")
    if cfg.target == "bmv2":
        _say("BMv2: no per-port delay and no calendar queues here; only the TDNs' rates differ, and what waits "
             "for a circuit is dropped")
    runs: list[dict[str, Any]] = []
    t_start = time.monotonic()

    def repetition(unit: str, work: Path) -> None:
        rep = int(unit)
        runs.extend(run_repetition(cfg, rep, out / "logs" / f"rep{rep + 1}"))

    _, interrupted = run_units([str(rep) for rep in range(cfg.repetitions)], repetition, out, [], _say)
    text, summary, figure = report(cfg, runs, out)
    cpu = cpu_summary(runs)
    judged = verdicts(cfg, runs)
    text += f"\nswitch CPU: {cpu_verdict(cpu)}"
    write_outcome(out, text, {"config": config_json(cfg), "summary": summary, "runs": runs, "cpu": cpu,
                              "notification_latency_us": notification_latencies(runs)}, judged,
                  summary_name="results.json", interrupted=interrupted,
                  regime=from_probe(None, nic_mbps=cfg.fast.rate_mbps, mtu=fabric(cfg).mtu, slot_ms=cfg.day_ms),
                  rows=[{k: v for k, v in r.items() if k in ("rep", "transport", "goodput_mbps", "complete", "switch_cpu",
                                                             "busiest_switch", "switches_cores", "machine_cpu")}
                        for r in runs])
    _say(f"wrote {out}/results.json, runs.csv, table.txt, {figure.name} ({time.monotonic() - t_start:.0f} s)")
    return finish(out, interrupted=interrupted, failed=not all(r.get("complete") for r in runs), verdicts=judged,
                       require_decided=require_decided, say=_say)


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main(sys.argv[1:]))
