"""Differential check: p4c's own v1model sample programs on BMv2 and on the Python target.

For every program of ``testdata/p4_16_samples`` in a p4c source checkout that includes
``v1model.p4`` and has an ``.stf`` packet test: compile it with p4c-bm2-ss, load it on
simple_switch_grpc and on the Python target through P4Runtime, install the STF's entries,
send its packets one by one and compare every packet's outputs. BMv2 is the reference
(the STF's own expectations are checked against BMv2 too, as a check of this reader).

    python -m bench.p4c_samples --p4c ~/src/p4c [--only NAME ...] [--bmv2-cache FILE]

Needs root (BMv2 runs on veth pairs: run it in a private network namespace). Prints the
fraction of programs on which the Python target matches BMv2 and the reasons for the rest,
and writes everything to bench/results/p4c-samples-<time>.json. The programs are read
from the checkout and compiled into a scratch folder; nothing of p4c's is kept here.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from controller.p4build import Artifact
from packettest import open_target
from packettest.frames import ipv4, udp
from packettest.pcap_target import PcapFilesTarget
from packettest.stf import (
    StfError,
    StfExpect,
    StfPacket,
    StfTest,
    expect_matches,
    parse_stf,
    stf_writes,
)

#: the ports a program without an STF may send to (BMv2 drops frames for other ports)
FUZZ_PORTS = tuple(range(8))

RESULTS = Path(__file__).parent / "results"
Outputs = list[list[Any]]  # per packet: sorted [port, hex] pairs


def samples(p4c: Path, *, with_stf: bool = True) -> list[Path]:
    """The v1model sample programs with an STF test (or, ``with_stf`` false, without)."""
    folder = p4c / "testdata" / "p4_16_samples"
    if not folder.is_dir():
        raise SystemExit(f"{folder} does not exist: --p4c must be a p4c source checkout")
    found = []
    for program in sorted(folder.glob("*.p4")):
        if not program.is_file() or program.with_suffix(".stf").exists() != with_stf:
            continue  # (some samples are dangling links)
        if re.search(r"#\s*include\s*<v1model\.p4>", program.read_text(errors="replace")):
            found.append(program)
    return found


def random_frames(seed: int, n: int) -> list[bytes]:
    """Frames for programs without an STF: random bytes, and Ethernet with common types
    and random payloads, and IPv4/UDP or TCP with random fields (a fixed seed)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        body = rng.randbytes(rng.randrange(0, 64))
        kind = i % 4
        if kind == 0:
            out.append(rng.randbytes(rng.randrange(1, 80)))
            continue
        ether_type = rng.choice((0x0800, 0x86DD, 0x8100, 0x0806, 0x88B5, rng.randrange(1 << 16)))
        if kind == 3:
            ether_type = 0x0800
            l4 = rng.choice((6, 17))
            head = udp(rng.randrange(1 << 16), rng.randrange(1 << 16), body) if l4 == 17 else \
                rng.randbytes(4) + bytes(8) + b"\x50\x10" + rng.randbytes(6) + body
            body = ipv4(f"10.0.{rng.randrange(4)}.{rng.randrange(256)}",
                        f"10.{rng.randrange(4)}.0.{rng.randrange(256)}", head, proto=l4,
                        ttl=rng.choice((0, 1, 64, 255)))
        out.append(rng.randbytes(12) + ether_type.to_bytes(2, "big") + body)
    return out


def compile_sample(program: Path, build: Path) -> Artifact | str:
    """The compiled artifact, or p4c's first error line."""
    out = Artifact(program.stem, build / f"{program.stem}.json", build / f"{program.stem}.p4info.txtpb")
    if out.json.exists() and out.p4info.exists():
        return out
    proc = subprocess.run(["p4c-bm2-ss", "--std", "p4-16", program.name, "-o", str(out.json),
                           "--p4runtime-files", str(out.p4info)], cwd=program.parent,
                          capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0 or not out.json.exists():
        lines = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()] or proc.stderr.splitlines()
        return "p4c: " + (lines[0][:200] if lines else f"exit {proc.returncode}")
    return out


def _open(kind: str, artifact: Artifact, test: StfTest, log_dir: Path | None) -> Any:
    """The target: BMv2 on pcap files unless packets enter by several ports (then veth
    pairs, which cannot carry a frame shorter than an Ethernet header)."""
    ins = {s.port for s in test.steps if isinstance(s, StfPacket)}
    if kind == "bmv2" and len(ins) == 1:
        assert log_dir is not None
        return contextlib.closing(PcapFilesTarget(artifact, test.ports, ins.pop(), log_dir))
    return open_target(kind, artifact, ports=test.ports or (0,), log_dir=log_dir)


def run(kind: str, artifact: Artifact, test: StfTest, log_dir: Path | None = None) -> Outputs | str:
    """Every packet's outputs on one target, or why the program did not run."""
    outputs: Outputs = []
    try:
        with _open(kind, artifact, test, log_dir) as sw:
            groups: dict[int, tuple[tuple[int, int], ...]] = {}
            for step in test.steps:
                if isinstance(step, StfPacket):
                    if len(step.data) < 14 and sw.kind == "bmv2":  # a packet socket cannot send it
                        outputs.append([["not sent: shorter than an Ethernet header"]])
                        continue
                    got = sw.send(step.port, step.data)
                    outputs.append(sorted([p, f.hex()] for p, f in got if p in test.ports))
                    continue
                try:
                    updates = stf_writes(sw.schema, step, groups)
                except (StfError, ValueError, KeyError) as exc:
                    return f"stf: {exc}"
                try:
                    sw.client.write(updates)
                except Exception as exc:  # a write the target refuses
                    return f"write: {str(exc).splitlines()[0][:200]}"
    except Exception as exc:  # what the target refuses at load time, or a crash
        return f"load: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    return outputs


def stf_verdict(test: StfTest, outputs: Outputs) -> bool:
    """Whether ``outputs`` satisfy the STF's expectations (as p4c's bmv2stf checks them)."""
    by_port: dict[int, list[bytes]] = collections.defaultdict(list)
    for packet in outputs:
        for out in packet:
            if len(out) == 2:  # not a packet left unsent
                by_port[out[0]].append(bytes.fromhex(out[1]))
    wanted: dict[int, list] = collections.defaultdict(list)
    for e in test.expects:
        wanted[e.port].append(e)
    for port in set(by_port) | set(wanted):
        got, exp = by_port.get(port, []), wanted.get(port, [])
        if any(not e.pattern for e in exp):
            continue
        if len(got) != len(exp) or not all(expect_matches(e, f) for e, f in zip(exp, got, strict=True)):
            return False
    return True


def reason_class(text: str) -> str:
    """A short class of a failure message, for counting."""
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\{.*", "{…}", text)
    return re.sub(r"\b\d+\b", "N", text)[:120]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.p4c_samples", description=__doc__.split("\n\n")[0])
    ap.add_argument("--p4c", type=Path, required=True, help="a p4c source checkout")
    ap.add_argument("--only", nargs="*", default=[], help="program names (without .p4)")
    ap.add_argument("--build", type=Path, default=Path(tempfile.gettempdir()) / "p4c-samples-build")
    ap.add_argument("--bmv2-cache", type=Path, help="reuse (and extend) BMv2's outputs from this JSON file")
    ap.add_argument("--fuzz", type=int, metavar="N", default=0,
                    help="instead: the programs without an STF, with no entries, N random frames each")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("BMv2 runs on veth pairs: run as root, in a private network namespace")
    args.build.mkdir(parents=True, exist_ok=True)
    cache: dict[str, Any] = json.loads(args.bmv2_cache.read_text()) if args.bmv2_cache and args.bmv2_cache.exists() else {}
    results = []
    programs = [p for p in samples(args.p4c, with_stf=not args.fuzz) if not args.only or p.stem in args.only]
    for i, program in enumerate(programs):
        name = program.stem
        rec: dict[str, Any] = {"program": name}
        results.append(rec)
        artifact = compile_sample(program, args.build)
        try:
            if args.fuzz:
                test = StfTest([StfPacket(0, f) for f in random_frames(len(name), args.fuzz)])
                test.expects = [StfExpect(p, "") for p in FUZZ_PORTS]
            else:
                test = parse_stf(program.with_suffix(".stf").read_text())
        except StfError as exc:
            rec.update(verdict="skipped", reason=f"stf: {exc}")
        if "verdict" not in rec and isinstance(artifact, str):
            rec.update(verdict="skipped", reason=artifact)
        if "verdict" in rec:
            print(f"[{i + 1}/{len(programs)}] {name}: skipped ({rec['reason']})", flush=True)
            continue
        assert isinstance(artifact, Artifact)
        key = f"{name} fuzz {args.fuzz}" if args.fuzz else name
        bmv2 = cache.get(key)
        if bmv2 is None:
            bmv2 = run("bmv2", artifact, test, log_dir=args.build / "logs" / name)
            if not isinstance(bmv2, str):  # failures may be transient: not cached
                cache[key] = bmv2
        if isinstance(bmv2, str):
            rec.update(verdict="skipped", reason=f"bmv2 {bmv2}")
        else:
            rec["bmv2_meets_stf"] = stf_verdict(test, bmv2)
            python = run("python", artifact, test)
            if isinstance(python, str):
                rec.update(verdict="refused" if python.startswith("load") else "error", reason=python)
            else:
                differ = [n for n, (a, b) in enumerate(zip(bmv2, python, strict=True)) if a != b]
                verdict = "pass"
                if differ:  # a program that draws random numbers differs by chance
                    verdict = "random" if "modify_field_rng_uniform" in artifact.json.read_text() else "differs"
                rec.update(verdict=verdict, packets=len(bmv2), differ=differ)
                if differ:
                    rec["first_difference"] = {"bmv2": bmv2[differ[0]], "python": python[differ[0]]}
        print(f"[{i + 1}/{len(programs)}] {name}: {rec['verdict']} {rec.get('reason', '')}", flush=True)
    if args.bmv2_cache:
        args.bmv2_cache.write_text(json.dumps(cache, indent=1, sort_keys=True))
    summarize(results, fuzz=bool(args.fuzz))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"p4c-samples-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"p4c": str(args.p4c), "results": results}, indent=1))
    print(f"results: {out}")
    return 0


def summarize(results: list[dict[str, Any]], *, fuzz: bool = False) -> None:
    verdicts = collections.Counter(r["verdict"] for r in results)
    compared = sum(verdicts[v] for v in ("pass", "differs", "refused", "error"))
    print(f"\n{len(results)} v1model samples; compared on both targets: {compared}")
    if compared:
        print(f"python target matches BMv2 on {verdicts['pass']}/{compared} "
              f"({100 * verdicts['pass'] / compared:.0f}%): {dict(verdicts)}")
    if verdicts["random"]:
        print(f"not compared: {verdicts['random']} drawing random numbers (outputs differ by chance)")
    stf_ok = [r for r in results if "bmv2_meets_stf" in r]
    if not fuzz:
        print(f"BMv2 meets the STF expectations on {sum(r['bmv2_meets_stf'] for r in stf_ok)}/{len(stf_ok)}")
    for verdict in ("refused", "error", "skipped"):
        reasons = collections.Counter(reason_class(r["reason"]) for r in results if r["verdict"] == verdict)
        for reason, n in reasons.most_common():
            print(f"  {verdict:<8} {n:3}  {reason}")
    for r in results:
        if r["verdict"] in ("differs", "random"):
            print(f"  {r['verdict']:<8} {r['program']}: packets {r['differ']} of {r['packets']}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
