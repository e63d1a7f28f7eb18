"""The TDTCP experiment's table and figure (pure but for writing the PNG)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from controller.experiments.comparisons import Side, judge_ratio
from controller.experiments.fidelity import Verdict
from controller.experiments.tdtcp import TdtcpConfig, capacity_mbps, percentile, summarize, tdn_at

__all__ = ["EARLY_US", "notification_latencies", "report", "verdicts"]

PAPER = ("TDTCP (SIGCOMM'22, Etalon, TDF 20): 24-41% more throughput than DCTCP, CUBIC and MPTCP "
         "on a reconfigurable network")


#: how early a switch's TDN change (and its notification) may come before the controller's
#: instant: a switch runs its schedule on its own estimate of the controller's clock, tens of
#: us off (up to 50 us measured); 1 ms is the experiment's night between two TDNs
EARLY_US = 1000.0


def notification_latencies(runs: Sequence[Mapping[str, Any]]) -> list[float]:
    """Microseconds from each TDN change to the sender's receipt of its notification: the
    latest change to the notified TDN at most :data:`EARLY_US` after the receipt. A
    notification a little before the controller's instant is a small negative latency, not
    one of the same TDN's change two days earlier (which read as 42 ms).

    >>> run = {"ticks": [(1_000_000.0, 0), (1_021_000.0, 1), (1_042_000.0, 0)],
    ...        "sender": {"icmp": {"received": [[1.0004, 0, "x"], [1.0213, 1, "x"], [1.04195, 0, "x"],
    ...                                         [1.0231, 0, "x"]]}}}
    >>> [round(x) for x in notification_latencies([run])]
    [400, 300, -50, 23100]
    """
    out = []
    for run in runs:
        ticks = sorted(run.get("ticks") or [])
        for t, tdn, *_ in ((run.get("sender") or {}).get("icmp") or {}).get("received", []):
            at = t * 1e6
            before = [instant for instant, k in ticks if k == tdn and instant <= at + EARLY_US]
            if before:
                out.append(at - before[-1])
    return out


def _table(cfg: TdtcpConfig, runs: Sequence[Mapping[str, Any]]) -> tuple[str, dict[str, Any]]:
    goodputs = {t: [r["goodput_mbps"] for r in runs if r["transport"] == t and r["complete"]] for t in cfg.transports}
    summary = summarize(goodputs)
    lat = notification_latencies(runs)
    delays = cfg.target == "python"  # BMv2 has no port delay, and this kernel no netem
    fast_delay = f"+{cfg.fast.delay_us} us per crossing" if delays else "no added delay"
    slow_delay = f"+{cfg.slow.delay_us} us" if delays else "no added delay"
    lines = [f"{cfg.target} target; TDN 0 (fast): {cfg.fast.rate_mbps:g} Mb/s, {fast_delay}; "
             f"TDN 1 (slow): {cfg.slow.rate_mbps:g} Mb/s, {slow_delay}; {cfg.day_ms:g} ms days, "
             f"{cfg.gap_ms:g} ms gaps; capacity {capacity_mbps(cfg):.2f} Mb/s averaged over a cycle"
             + ("" if delays else "; waiting packets are dropped (no calendar queues)"),
             "",
             f"{'transport':<10}{'goodput Mb/s':<16}{'of capacity':<13}{'vs single':<11}{'vs cubic':<10}{'ran':<9}"]
    for t in cfg.transports:
        row = summary.get(t)
        n_all = sum(1 for r in runs if r["transport"] == t)
        if row is None:
            lines.append(f"{t:<10}{'-':<16}{'-':<13}{'-':<11}{'-':<10}0/{n_all}")
            continue
        vs = [f"{row[k]:.2f}x" if k in row else "-" for k in ("vs_single", "vs_cubic")]
        lines.append(f"{t:<10}{row['mean_mbps']:.2f} ± {row['sd_mbps']:.2f}    {row['mean_mbps'] / capacity_mbps(cfg):<13.2f}"
                     f"{vs[0] if t != 'single' else '':<11}{vs[1] if t != 'cubic' else '':<10}{int(row['n'])}/{n_all}")
    switches = [len((r.get("sender") or {}).get("switches", [])) for r in runs if r["transport"] == "tdtcp"]
    lines += ["", f"notification latency, change to the sender's receipt: p50 {percentile(lat, 0.5) / 1000:.2f} ms, "
              f"p99 {percentile(lat, 0.99) / 1000:.2f} ms over {len(lat)} notifications",
              f"TDN switches the per-TDN sender applied: {switches}", "", f"paper: {PAPER}"]
    summary["notification_latency_ms"] = {"p50": percentile(lat, 0.5) / 1000, "p99": percentile(lat, 0.99) / 1000,
                                          "n": len(lat)}
    return "\n".join(lines), summary


def _shade_tdns(ax: Any, cfg: TdtcpConfig, start_s: float, epoch_us: float, length_s: float) -> None:
    """Colour ``ax``'s x axis (seconds from ``start_s`` on the monotonic clock) by the TDN."""
    step = 0.001
    for k in range(int(length_s / step)):
        tdn = tdn_at(cfg, (start_s + k * step) * 1e6 - epoch_us)
        if tdn is not None:
            ax.axvspan(k * step, (k + 1) * step, color="tab:green" if tdn == 0 else "tab:orange", alpha=0.08, lw=0)


def _plot(cfg: TdtcpConfig, runs: Sequence[Mapping[str, Any]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(10, 10))
    first = [r for r in runs if r["rep"] == 0]
    for r in first:
        samples = r["samples"]
        top.plot([t for t, _ in samples], [b / 1e6 for _, b in samples], label=f"{r['transport']} "
                 f"({r['goodput_mbps']:.2f} Mb/s)")
    horizon = max((r["samples"][-1][0] for r in first if r["samples"]), default=0.0)
    top.plot([0, horizon], [0, capacity_mbps(cfg) / 8 * horizon], color="gray", ls="--", lw=1,
             label="capacity (cycle average)")
    top.set_xlabel("seconds into the transfer")
    top.set_ylabel("MB delivered in order")
    top.set_title("delivered over time per transport, first repetition (slope: goodput)")
    top.legend(loc="upper left", fontsize=8)
    window_s = 0.3
    tdtcp = next((r for r in first if r["transport"] == "tdtcp"), None)
    if tdtcp is not None:
        epoch = tdtcp["epoch_us"]
        timeline = (tdtcp.get("sender") or {}).get("timeline") or {}
        ts = timeline.get("t", [])
        if ts:
            mid = ts[len(ts) // 2]
            window = [i for i, t in enumerate(ts) if mid <= t <= mid + window_s]
            for tdn, series in sorted((timeline.get("tdn") or {}).items()):
                bottom.plot([ts[i] - mid for i in window], [series["cwnd"][i] / 1000 for i in window],
                            label=f"cwnd of TDN {tdn}")
            # what each userspace sender had acknowledged, 10 ms apart, in a stretch of its own
            # transfer at the same phase of the TDN cycle (kernel CUBIC is sampled every 100 ms
            # only: not shown)
            for r in first:
                line = (r.get("sender") or {}).get("timeline") or {}
                if r["transport"] == "cubic" or not line.get("t"):
                    continue
                begin = r["sender"]["start"] + (mid - tdtcp["sender"]["start"])
                # the same phase of the TDN cycle as the TDTCP sender's stretch (same epoch)
                cycle_s = 2 * cfg.period_us / 1e6
                begin += ((mid * 1e6 - epoch) - (begin * 1e6 - r["epoch_us"])) / 1e6 % cycle_s
                pts = [(t - begin, a) for t, a in zip(line["t"], line["acked"], strict=True)
                       if begin <= t <= begin + window_s]
                rates = [(t1, (a1 - a0) * 8 / (t1 - t0) / 1e6) for (t0, a0), (t1, a1) in itertools.pairwise(pts)
                         if t1 > t0]
                middle.step([t for t, _ in rates], [g for _, g in rates], where="pre", label=r["transport"])
            for ax in (middle, bottom):
                _shade_tdns(ax, cfg, mid, epoch, window_s)
            middle.set_ylabel("acknowledged, Mb/s (10 ms)")
            middle.set_title(f"goodput, {window_s:g} s mid-transfer, with the TDNs (first repetition)")
            middle.legend(loc="upper right", fontsize=8)
            bottom.set_xlabel("seconds (green: TDN 0 fast, orange: TDN 1 slow, white: gap)")
            bottom.set_ylabel("KB")
            bottom.set_title("per-TDN congestion windows of the TDTCP sender, same stretch")
            bottom.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(cfg: TdtcpConfig, runs: Sequence[Mapping[str, Any]], out: Path) -> tuple[str, dict[str, Any], Path]:
    """The table (text), the summary and the figure written to ``out``."""
    text, summary = _table(cfg, runs)
    figure = _plot(cfg, runs, out / "tdtcp.png")
    return text, summary, figure


def verdicts(cfg: TdtcpConfig, runs: Sequence[Mapping[str, Any]]) -> list[Verdict]:
    """The first transport's goodput against each other one's, paired by repetition and
    judged on both's transfers by the one rule (a transfer that did not complete failed).

    >>> cfg = TdtcpConfig(transports=("tdtcp", "cubic"))
    >>> runs = [{"rep": i, "transport": t, "complete": True, "goodput_mbps": g, "machine_cpu": 0.3}
    ...         for i in range(3) for t, g in (("tdtcp", 18.0 + i / 10), ("cubic", 10.0))]
    >>> [v.text() for v in verdicts(cfg, runs)]
    ["tdtcp's goodput is higher: 1.81x cubic's"]
    """
    first = cfg.transports[0]

    def side(transport: str) -> Side:
        return Side(transport, [{**r, "ok": bool(r.get("complete"))} for r in runs if r.get("transport") == transport])

    out = []
    for other in cfg.transports[1:]:
        verdict, spread = judge_ratio(f"{first} vs {other}", f"{first}'s goodput is", side(first), side(other),
                                      key=lambda r: r["rep"], value=lambda r: r["goodput_mbps"],
                                      below="lower", above="higher")
        if verdict.finding:
            verdict = dataclasses.replace(verdict, finding=f"{verdict.finding}: {spread['mean']:.2f}x {other}'s")
        out.append(verdict)
    return out
