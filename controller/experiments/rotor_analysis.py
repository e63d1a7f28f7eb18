"""The rotor experiment's analysis: one run's datagrams to figures, repetitions to mean and
spread, expectations beside them, and the tables (pure; the runner does the I/O).

A datagram's path is read from its TTL: a host sends with 64, the first ToR and every ToR
that forwards it onwards decrement it, and so does the last ToR towards the host, so it
arrives with ``63 - circuits crossed``. *On path* means along the routing's own paths: one
circuit for direct routing, at most two for VLB. The Python target's calendar queue hands a
packet to an ordinary FIFO when its slot starts, so a slot's overflow leaves after the slot
ends: in the night (the circuit switch drops it) or in the next day, to the wrong rack, which
forwards it on (a *detour*). Throughput counts on-path deliveries only; detours are shown.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller.experiments.rotor import (
    LightLoad,
    Point,
    RotorConfig,
    capacity,
    expected_delivered,
    light_load,
    pattern_pairs,
    schedule_of,
)
from controller.models.collectives import ring_allreduce_time

__all__ = [
    "HOST_TTL",
    "aggregate",
    "allreduce_expectation",
    "analyze_run",
    "circuits_crossed",
    "expectations",
    "mean_sd",
    "on_path",
    "summarize_allreduce",
]

HOST_TTL = 64
#: TCP payload per frame at a 1500-byte MTU (1448 of 1514 bytes on the wire)
TCP_EFFICIENCY = 1448 / 1514


def circuits_crossed(ttl: int) -> int:
    """Circuits a datagram crossed, from the TTL it arrived with.

    >>> circuits_crossed(62), circuits_crossed(61)
    (1, 2)
    """
    return HOST_TTL - 1 - ttl


def on_path(routing: str, circuits: int) -> bool:
    """Did the datagram follow the routing's own paths?

    >>> on_path("direct", 1), on_path("direct", 2), on_path("vlb", 2), on_path("vlb", 3)
    (True, False, True, False)
    """
    return 1 <= circuits <= (1 if routing == "direct" else 2)


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def analyze_run(point: Point, levels: Sequence[float], sent: Mapping[int, Sequence[int]],
                rows: Iterable[Sequence[float]]) -> dict[str, Any]:
    """One repetition of one point: per offered level, what arrived on path and on detours
    (as fractions of a source's link rate), and the lightest level's one-way delays.

    ``sent[src][level]`` counts the datagrams each source sent; ``rows`` are the receivers'
    ``[src, seq, level, sent_time, arrived_time, ttl]`` (duplicates are counted once).

    >>> p = Point(sweep="patterns", slice_us=1000, night_us=0, pattern="hot-pair", routing="direct", calendar="hold")
    >>> rows = [[0, 0, 0, 1.0, 1.002, 62], [0, 1, 0, 1.1, 1.104, 62], [0, 2, 1, 2.0, 2.01, 61], [0, 3, 1, 2.1, 2.2, 62]]
    >>> r = analyze_run(p, [0.1, 1.0], {0: [2, 4]}, rows)
    >>> r["on_path"], r["detour"], r["throughput"], r["probe_delivered"], round(r["delay_p50_ms"], 1)
    ([0.1, 0.25], [0.0, 0.25], 0.25, 1.0, 3.0)

    ``throughput_in_level`` counts only what arrived while its level was still sending (by
    the last send of that level a receiver saw): a ToR's backlog delivered after the level
    ended, which ``throughput`` counts, is left out.

    >>> late = [[0, 0, 1, 2.0, 2.01, 62], [0, 1, 1, 2.1, 2.3, 62]]   # the second arrives after the last send
    >>> analyze_run(p, [0.1, 1.0], {0: [0, 2]}, late)["throughput_in_level"]
    0.5
    """
    seen: dict[tuple[int, int], Sequence[float]] = {}
    for r in rows:
        seen.setdefault((int(r[0]), int(r[1])), r)
    n_levels = len(levels)
    sent_per_level = [sum(int(counts[i]) for counts in sent.values()) for i in range(n_levels)]
    path_n = [0] * n_levels
    detour_n = [0] * n_levels
    probe_delays: list[float] = []
    level_end = [-math.inf] * n_levels  # the last send of each level that reached a receiver
    for r in seen.values():
        if 0 <= int(r[2]) < n_levels:
            level_end[int(r[2])] = max(level_end[int(r[2])], float(r[3]))
    in_level_n = [0] * n_levels
    for _src, _seq, level, t_sent, t_arrived, ttl in (r[:6] for r in seen.values()):
        lv = int(level)
        if not 0 <= lv < n_levels:
            continue
        if on_path(point.routing, circuits_crossed(int(ttl))):
            path_n[lv] += 1
            in_level_n[lv] += t_arrived <= level_end[lv]
            if lv == 0:
                probe_delays.append((t_arrived - t_sent) * 1000)
        else:
            detour_n[lv] += 1
    frac = [p / s if s else math.nan for p, s in zip(path_n, sent_per_level, strict=True)]
    det = [d / s if s else math.nan for d, s in zip(detour_n, sent_per_level, strict=True)]
    on = [lv * f for lv, f in zip(levels, frac, strict=True)]
    in_level = [lv * n / s for lv, n, s in zip(levels, in_level_n, sent_per_level, strict=True) if s]
    return {
        "point": point.key(), "levels": list(levels), "sent": sent_per_level,
        "on_path": on, "detour": [lv * d for lv, d in zip(levels, det, strict=True)],
        "throughput": max((x for x in on if not math.isnan(x)), default=math.nan),
        "throughput_in_level": max(in_level, default=math.nan),
        "probe_delivered": frac[0],
        "delay_p50_ms": _percentile(probe_delays, 50), "delay_p90_ms": _percentile(probe_delays, 90),
        "delay_p99_ms": _percentile(probe_delays, 99),
        "detour_share_top": det[-1] / (det[-1] + frac[-1]) if (det[-1] + frac[-1]) > 0 else 0.0,
    }


def mean_sd(values: Iterable[float]) -> tuple[float, float, int]:
    """Mean, sample standard deviation (0 for one value) and count of the finite values.

    >>> mean_sd([1.0, 2.0, 3.0, float("nan")])
    (2.0, 1.0, 3)
    """
    xs = [v for v in values if v is not None and not math.isnan(v)]
    if not xs:
        return math.nan, math.nan, 0
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0), len(xs)


def _light(point: Point, racks: int) -> list[LightLoad]:
    schedule = schedule_of(point, racks)
    return [light_load(schedule, point.routing, point.calendar, s, d) for s, d in pattern_pairs(point.pattern, racks)]


def expectations(point: Point, cfg: RotorConfig) -> dict[str, Any]:
    """What ``point`` should give with ideal calendar queues (or none): the throughput at
    each level, the most, the light-load delivered fraction, and the one-way delay
    percentiles (ms) of the schedule's wait alone: the switches' own latency (about a
    millisecond over three software switches) and the spacing of packets released together
    at the link rate come on top."""
    schedule = schedule_of(point, cfg.racks)
    cap = capacity(point.pattern, point.routing, point.calendar, schedule)
    light = _light(point, cfg.racks)
    delays = sorted(d / 1000 for ll in light for d in ll.delays_us)
    hops = [ll.circuit_hops for ll in light if not math.isnan(ll.circuit_hops)]
    return {
        "capacity": cap,
        "per_level": [expected_delivered(lv, cap, point.calendar) for lv in cfg.levels],
        "throughput": max(expected_delivered(lv, cap, point.calendar) for lv in cfg.levels),
        "probe_delivered": statistics.fmean(ll.delivered for ll in light),
        "circuit_hops": statistics.fmean(hops) if hops else math.nan,
        "delay_p50_ms": _percentile(delays, 50), "delay_p90_ms": _percentile(delays, 90),
        "delay_p99_ms": _percentile(delays, 99),
        "mean_wait_ms": statistics.fmean(delays) if delays else math.nan,
    }


FIGURES = ("throughput", "throughput_in_level", "probe_delivered", "delay_p50_ms", "delay_p90_ms", "delay_p99_ms", "detour_share_top")


def aggregate(points: Sequence[Point], runs: Sequence[Mapping[str, Any]], cfg: RotorConfig) -> list[dict[str, Any]]:
    """Per point: every figure's mean, spread (sample sd) and repetitions, the per-level
    means, and the expectations (points without a finished run are left out)."""
    out = []
    for p in points:
        mine = [r for r in runs if r["point"] == p.key()]
        if not mine:
            continue
        row: dict[str, Any] = {"point": p.key(), "sweep": p.sweep, "slice_ms": p.slice_us / 1000,
                               "night_ms": p.night_us / 1000, "duty": p.duty, "pattern": p.pattern,
                               "routing": p.routing, "calendar": p.calendar, "repetitions": len(mine)}
        for fig in FIGURES:
            row[fig], row[f"{fig}_sd"], _ = mean_sd(r[fig] for r in mine)
        row["levels"] = list(cfg.levels)
        row["on_path"] = [mean_sd(r["on_path"][i] for r in mine)[0] for i in range(len(cfg.levels))]
        row["detour"] = [mean_sd(r["detour"][i] for r in mine)[0] for i in range(len(cfg.levels))]
        row["expected"] = expectations(p, cfg)
        out.append(row)
    return out


def _both_ways(point: Point, racks: int) -> bool:
    """Is there a slice in which every ring neighbour pair is connected both ways (what a
    TCP handshake needs when nothing waits for its circuit)?"""
    schedule = schedule_of(point, racks)
    return all({i for _, i in schedule.connected(r, (r + 1) % racks)} & {i for _, i in schedule.connected((r + 1) % racks, r)}
               for r in range(racks))


def allreduce_expectation(cfg: RotorConfig, point: Point) -> dict[str, Any]:
    """Ring all-reduce over one host per rack: every rank sends to the next rack, a
    permutation, so each ring link gets the permutation's capacity. The estimate is the
    bandwidth term at that rate (TCP payload per frame counted) plus, per ring step, the
    mean light-load wait for the step's circuit. Without calendar queues TCP needs both
    directions of a ring link up at once; on the strobe they never are, so there is no
    estimate (``nan``) and a note says why."""
    schedule = schedule_of(point, cfg.racks)
    cap = capacity("permutation", point.routing, point.calendar, schedule)
    rate = cfg.rate_mbps * 1e6 / 8 * TCP_EFFICIENCY * cap
    steps = 2 * (cfg.racks - 1)
    ring = dataclasses.replace(point, pattern="permutation")
    wait = statistics.fmean(d for ll in _light(ring, cfg.racks) for d in ll.delays_us) / 1e6
    bandwidth = ring_allreduce_time(cfg.allreduce_bytes, cfg.racks, rate)
    out: dict[str, Any] = {"capacity": cap, "bandwidth_s": bandwidth, "wait_s": steps * wait,
                           "estimate_s": bandwidth + steps * wait, "note": ""}
    if point.calendar == "drop" and not _both_ways(point, cfg.racks):
        out["estimate_s"] = math.nan
        out["note"] = "no slice connects ring neighbours both ways: without calendar queues TCP cannot even connect"
    return out


def summarize_allreduce(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Completion time per routing: mean, sd, min, max of the successful iterations.

    >>> summarize_allreduce([{"routing": "direct", "ok": True, "seconds": s} for s in (1.0, 2.0, 3.0)])
    [{'routing': 'direct', 'mean_s': 2.0, 'sd_s': 1.0, 'min_s': 1.0, 'max_s': 3.0, 'ok': 3, 'failed': 0}]
    """
    out = []
    for routing in dict.fromkeys(r["routing"] for r in rows):
        mine = [r for r in rows if r["routing"] == routing]
        ok = [float(r["seconds"]) for r in mine if r["ok"]]
        mean, sd, _ = mean_sd(ok)
        out.append({"routing": routing, "mean_s": mean, "sd_s": sd, "min_s": min(ok, default=math.nan),
                    "max_s": max(ok, default=math.nan), "ok": len(ok), "failed": len(mine) - len(ok)})
    return out
