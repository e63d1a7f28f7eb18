"""Test tiers, target selection and guaranteed network cleanup.

Tiers are pytest markers given by directory: ``tests/unit`` (no root, no network),
``tests/target`` (packet-level, on the selected P4 target) and ``tests/emulation``
(Mininet, root). The target comes from ``--target`` or ``MLFABRIC_TARGET`` (python|bmv2).
A tier that cannot run here is skipped with its reason, and the reasons are printed once
per tier at the end of the run.
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

TIERS = ("unit", "target", "emulation")
TARGETS = ("python", "bmv2")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--target",
        choices=TARGETS,
        default=os.environ.get("MLFABRIC_TARGET", "python"),
        help="P4 target for target and emulation tests (default: $MLFABRIC_TARGET or python)",
    )
    parser.addoption(
        "--record-golden",
        action="store_true",
        help="conformance: record BMv2's outputs as the new goldens (with --target bmv2)",
    )


def _tier_of(path: Path) -> str | None:
    """The tier of a test file: its folder under tests/, or unit for doctests in packages."""
    parts = path.parts
    if "tests" in parts:
        below = parts[parts.index("tests") + 1 :]
        return next((t for t in TIERS if t in below), None)
    if {"controller", "pybmv2", "packettest", "workloads"} & set(parts):
        return "unit"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    target = config.getoption("--target")
    reasons = tier_skip_reasons(target)
    for item in items:
        tier = _tier_of(Path(str(item.fspath)))
        if tier is None:
            continue
        item.add_marker(getattr(pytest.mark, tier))
        reason = reasons.get(tier)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


def tier_skip_reasons(target: str) -> dict[str, str]:
    """Why each tier cannot run on this machine with this target (absent: it can)."""
    reasons: dict[str, str] = {}
    if target == "bmv2" and shutil.which("simple_switch_grpc") is None:
        reasons["target"] = "MLFABRIC_TARGET=bmv2 but simple_switch_grpc is not installed"
        reasons["emulation"] = reasons["target"]
    if "emulation" not in reasons:
        if os.geteuid() != 0:
            reasons["emulation"] = "Mininet emulation needs root"
        else:
            try:
                import mininet.net  # noqa: F401
            except ImportError:
                reasons["emulation"] = "Debian's mininet is not importable (run make setup)"
    return reasons


_skipped: dict[str, list[str]] = defaultdict(list)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        tier = _tier_of(Path(report.fspath))
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped[tier or "other"].append(reason.removeprefix("Skipped: "))


def _selected_by_markexpr(config: pytest.Config, tier: str) -> bool:
    """Whether ``-m`` can select tests of ``tier`` (markers other than the tiers count as present)."""
    from _pytest.mark.expression import Expression

    expr = config.getoption("markexpr")
    if not expr:
        return True
    return bool(Expression.compile(expr).evaluate(lambda name, **_: name == tier or name not in TIERS))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    tr = terminalreporter
    tr.section("mlfabric test tiers")
    tr.write_line(f"target: {config.getoption('--target')}"
                  + (f", switch processes' engine: {os.environ.get('MLFABRIC_ENGINE') or 'auto'}"
                     if config.getoption("--target") == "python" else ""))
    for tier in TIERS:
        reasons = _skipped.get(tier, [])
        if not _selected_by_markexpr(config, tier):
            tr.write_line(f"{tier:<10} not selected (-m {config.getoption('markexpr')})")
            continue
        if not reasons:
            tr.write_line(f"{tier:<10} ran")
            continue
        counts: dict[str, int] = defaultdict(int)
        for r in reasons:
            counts[r] += 1
        for reason, n in counts.items():
            tr.write_line(f"{tier:<10} {n} skipped: {reason}")


@pytest.fixture(scope="session")
def target_name(pytestconfig: pytest.Config) -> str:
    return str(pytestconfig.getoption("--target"))


#: the Python target's packet engines a switch-process test runs on, each in turn
SWITCH_ENGINES = ("python", "native")


def engine_for_target(target_name: str, engine: str) -> str | None:
    """The ``--engine`` a switch process gets: ``engine`` on the Python target; on BMv2 None
    (and the native run is skipped: the engine is the Python target's)."""
    if target_name == "python":
        return engine
    if engine == "native":
        pytest.skip("the native engine is an engine of the Python target")
    return None


@pytest.fixture(params=SWITCH_ENGINES)
def switch_engine(request: pytest.FixtureRequest, target_name: str) -> str | None:
    """A switch process's engine: every test using it runs on both engines."""
    return engine_for_target(target_name, request.param)


@pytest.fixture(scope="session", autouse=True)
def _net_cleanup_finalizer():
    """Whatever a crashed test left behind (switch processes, links) is removed at the end."""
    yield
    if os.geteuid() == 0:
        from controller.netstate import clean_all

        clean_all(only_dead_owners=True)


@pytest.fixture(autouse=True, scope="session")
def _results_outside_the_repository(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Runs started by tests (fabric up's run folder, experiments without --out) write to a
    temporary folder, not to the repository's results/."""
    if "MLFABRIC_RESULTS_DIR" not in os.environ:
        os.environ["MLFABRIC_RESULTS_DIR"] = str(tmp_path_factory.mktemp("results"))
