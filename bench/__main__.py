"""Run every benchmark (or the sections named: ``--section NAME``, ``make bench
BENCH=NAME``), print a table and write bench/results/<time>.json.

Each figure is reported with its unit, and where BMv2 is installed, next to BMv2's figure
measured in the same run (the ratio column).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench import machine
from bench.sections import OPT_IN, SECTIONS, Context, run_sections

RESULTS = Path(__file__).parent / "results"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="make bench")
    parser.add_argument("--quick", action="store_true", help="shorter runs (for a smoke check)")
    parser.add_argument("--section", action="append", default=[], choices=list(SECTIONS), metavar="NAME",
                        help=f"run only this section (repeatable): {', '.join(SECTIONS)}; "
                             f"{', '.join(OPT_IN)} run only when named")
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    rows = run_sections(Context.of_machine(args.quick), args.section)
    print(f"[bench] every section: {time.monotonic() - t0:.0f} s")
    print()
    print(f"{'figure':<52} {'unit':<10} {'python':>12} {'bmv2':>12} {'py/bmv2':>8}  goal")
    for r in rows:
        bm = f"{r['bmv2']:12.1f}" if r["bmv2"] is not None else f"{'-':>12}"
        ratio = f"{r['python_over_bmv2']:8.2f}" if r["python_over_bmv2"] is not None else f"{'-':>8}"
        print(f"{r['figure']:<52} {r['unit']:<10} {r['python']:12.1f} {bm} {ratio}  {r['goal']}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / time.strftime("bench-%Y%m%d-%H%M%S.json")
    out.write_text(json.dumps({"machine": machine.describe(), "figures": rows}, indent=2) + "\n")
    print(f"\n[bench] results written to {out}")
    return 0


if __name__ == "__main__":
    from controller.experiments.results import interrupt_on_signals

    try:
        with interrupt_on_signals():  # SIGTERM/SIGHUP unwind the fabrics and switches too
            sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt as exc:
        print(f"[bench] interrupted by {exc or 'SIGINT'}: every switch and fabric was torn down", file=sys.stderr)
        sys.exit(130)
