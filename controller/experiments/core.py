"""What every experiment shares, once: refusing bad input before anything starts, the results
folder, the run over its units (fabrics, repetitions, shapes) with signals turned into a
recorded interruption, the verdicts' lines and JSON, and the exit status.

An experiment's runner (``mininet/*_experiment.py``) is then its configuration, its traffic
and its comparisons::

    try:
        cfg = ...validate()                                   # one-line ConfigError
        for topo in topologies: check_free(topo)              # before the results folder
    except MlfabricError as exc:
        return refuse(exc)
    out = results_folder("rail-only", a.out, say)
    infos, interrupted = run_units(units, run_one, out, rows, say)
    text, data, verdicts = report(...)                        # the experiment's own
    write_outcome(out, text, data, rows, verdicts)
    return finish(out, interrupted=interrupted, failed=..., verdicts=verdicts,
                  require_decided=a.require_decided)               # index.html, then the status

Exit status, the same for every experiment: 130 when a signal stopped it (what finished is
written, marked interrupted), 1 when a run failed that was not meant to, 3 with
``--require-decided`` when a comparison is undecided (:data:`UNDECIDED_EXIT`), else 0; 2 for
bad input, before anything starts.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from controller.dashboard import journal
from controller.dashboard.beside import own_use_line
from controller.errors import MlfabricError
from controller.experiments.fidelity import Verdict, all_decided, fidelity_lines, verdicts_json
from controller.experiments.html_report import write_index
from controller.experiments.options import UNDECIDED_EXIT
from controller.experiments.regime import Emulated, RealFabric, regime_json, regime_lines
from controller.experiments.results import (
    interrupt_on_signals,
    new_results_dir,
    stopped_by,
    write_csv,
    write_json,
)

__all__ = ["BAD_INPUT_EXIT", "FAILED_EXIT", "INTERRUPTED_EXIT", "exit_status", "finish", "refuse", "results_folder",
           "run_units", "write_outcome"]

BAD_INPUT_EXIT = 2
FAILED_EXIT = 1
INTERRUPTED_EXIT = 130


def refuse(exc: MlfabricError) -> int:
    """Bad input, refused in one line before anything started."""
    print(f"mlfabric: error: {exc}", file=sys.stderr)
    return BAD_INPUT_EXIT


def results_folder(experiment: str, out: Path | None, say: Callable[[str], None]) -> Path:
    """``out`` (made), else a new ``results/<experiment>-<time>/``; said."""
    folder = out or new_results_dir(experiment)
    folder.mkdir(parents=True, exist_ok=True)
    say(f"results folder: {folder}")
    journal.record("run", experiment=experiment, folder=str(folder.resolve()))
    return folder


def run_units(units: Sequence[str], run: Callable[[str, Path], Any], out: Path, rows: Sequence[Mapping[str, Any]],
              say: Callable[[str], None], *, csv_name: str = "iterations.csv") -> tuple[dict[str, Any], str | None]:
    """Runs ``run(unit, workdir)`` for each unit in turn (a fabric, a repetition, a shape),
    in one temporary working folder (with ``logs/`` in it), writing ``rows`` so far to
    ``out/csv_name`` after each. SIGINT, SIGTERM or SIGHUP stop it, every ``with`` block of
    the run tearing its emulation down. Returns each finished unit's info and, if a signal
    stopped it, what to say about that."""
    infos: dict[str, Any] = {}
    try:
        with interrupt_on_signals(), tempfile.TemporaryDirectory(prefix="mlfabric-") as tmp:
            work = Path(tmp)
            (work / "logs").mkdir()
            for index, unit in enumerate(units, 1):
                journal.record("unit", index=index, of=len(units), name=str(unit))
                infos[unit] = run(unit, work)
                if rows:
                    write_csv(out / csv_name, rows)
    except KeyboardInterrupt as exc:
        interrupted = (f"stopped by {stopped_by(exc)} after {len(infos)} of {len(units)} "
                       f"({len(rows)} rows); the emulation was torn down")
        say(interrupted)
        if rows:
            write_csv(out / csv_name, rows)
        return infos, interrupted
    return infos, None


def write_outcome(out: Path, text: str, data: Mapping[str, Any], verdicts: Sequence[Verdict], *,
                  summary_name: str = "summary.json", rows: Sequence[Mapping[str, Any]] | None = None,
                  csv_name: str = "runs.csv", interrupted: str | None = None,
                  regime: Emulated | None = None) -> str:
    """The folder's ``table.txt`` (``text``, the regime the run stands for and the verdicts'
    lines), its summary JSON (``data`` with ``regime``, ``fidelity`` and ``interrupted``)
    and, given ``rows``, their CSV; the table is printed too. Returns the table."""
    real = RealFabric()
    own = own_use_line()
    lines = [text, *(regime_lines(real, regime) if regime is not None else []), *fidelity_lines(verdicts),
             *([own] if own else [])]
    table = "\n".join(lines)
    if interrupted:
        table += f"\ninterrupted: {interrupted}"
    (out / "table.txt").write_text(table + "\n")
    write_json(out / summary_name, {**data, "regime": regime_json(real, regime) if regime is not None else None,
                                    "fidelity": verdicts_json(verdicts), "interrupted": interrupted,
                                    **({"dashboard": own} if own else {})})
    if rows is not None:
        write_csv(out / csv_name, rows)
    for v in verdicts:
        journal.record("verdict", comparison=v.comparison, outcome=v.outcome, decided=v.decided, why=v.text())
    print()
    print(table)
    print()
    return table


def exit_status(*, interrupted: str | None, failed: bool, verdicts: Sequence[Verdict], require_decided: bool,
                say: Callable[[str], None] | None = None) -> int:
    """The run's exit status (the module docstring's order).

    >>> from controller.experiments.fidelity import Runs
    >>> ok = [Verdict("a", "even", 3, 0, runs=(Runs("x", 3, 3), Runs("y", 3, 3)), needed=2)]
    >>> exit_status(interrupted=None, failed=False, verdicts=ok, require_decided=True)
    0
    >>> exit_status(interrupted=None, failed=False, verdicts=[], require_decided=True)
    3
    >>> exit_status(interrupted="SIGTERM", failed=True, verdicts=ok, require_decided=True)
    130
    """
    if interrupted is not None:
        return INTERRUPTED_EXIT
    if failed:
        return FAILED_EXIT
    if require_decided and not all_decided(verdicts):
        if say is not None:
            say("undecided: a comparison is not decided (--require-decided)")
        return UNDECIDED_EXIT
    return 0


def finish(out: Path, *, interrupted: str | None, failed: bool, verdicts: Sequence[Verdict], require_decided: bool,
           say: Callable[[str], None] | None = None) -> int:
    """The run's last step: its folder's ``index.html`` (:mod:`html_report`, from everything the
    run wrote) and then its exit status (:func:`exit_status`). A page that cannot be written is
    said, never a reason to lose the run's status."""
    try:
        page = write_index(out)
    except OSError as exc:
        print(f"could not write {out / 'index.html'}: {exc}", file=sys.stderr)
    else:
        (say or print)(f"the run's page: {page}")
    status = exit_status(interrupted=interrupted, failed=failed, verdicts=verdicts, require_decided=require_decided,
                         say=say)
    journal.record("run-end", status=("interrupted" if interrupted else "failed" if failed
                                      else "decided" if all_decided(verdicts) else "undecided"), exit=status)
    return status
