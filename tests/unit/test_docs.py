"""The documentation stays true: the CLI reference is the CLI's, every ``mlfabric`` and ``make``
command printed in the README and in docs/ parses against the CLI and the Makefile as it
stands, every relative link leads to a file, and the README stays a front page."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from controller.cli.main import EXPERIMENT_MODULES, build_parser
from controller.cli.reference import reference_markdown
from controller.emulation import load_emulation_module

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: the README is the front door: what mlfabric is, set-up, quick start, a paragraph per capability
README_MAX_LINES = 400


def _code_lines(page: Path) -> list[str]:
    """The lines inside the page's fenced code blocks."""
    out, inside = [], False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
            continue
        if inside:
            out.append(line.strip())
    return out


def _commands(prefix: str) -> list[tuple[Path, str]]:
    found = []
    for page in PAGES:
        if page.name == "cli.md":
            continue
        for line in _code_lines(page):
            line = re.sub(r"^(\$|#)\s+", "", line)
            if line.startswith(f"{prefix} "):
                found.append((page, line))
    return found


def _runnable(line: str) -> list[str] | None:
    """The command's words, or None where the line shows a pattern rather than a command."""
    line = re.split(r"\s+#\s", line, maxsplit=1)[0]
    line = re.split(r"\s(?:\||&&|;|>|2>)\s?", line, maxsplit=1)[0].strip()
    if any(mark in line for mark in ("...", "[", "<", "{", "$(")):
        return None
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    if any("|" in w for w in words):  # alternatives: gen|check|show
        return None
    # a placeholder (TOPOLOGY, FILE, JOB) stands for any value
    return [re.sub(r"^[A-Z][A-Z_]{2,}$", "x", w) for w in words]


class _Refused(Exception):
    pass


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code:
            raise _Refused(err.getvalue().strip().splitlines()[-1] if err.getvalue() else str(exc)) from None
        return argparse.Namespace()  # --help


def test_cli_reference_is_current() -> None:
    assert (REPO / "docs" / "cli.md").read_text() == reference_markdown(build_parser()), \
        "docs/cli.md is stale: run make docs"


def test_every_mlfabric_command_shown_parses() -> None:
    parser = build_parser()
    checked, refused = 0, []
    for page, line in _commands("mlfabric"):
        argv = _runnable(line)
        if argv is None:
            continue
        try:
            args = _parse(parser, argv[1:])
            rest = [w for w in getattr(args, "rest", []) if w != "--"]
            if getattr(args, "command", None) == "experiment" and getattr(args, "name", None):
                _parse(load_emulation_module(EXPERIMENT_MODULES[args.name]).build_parser(), rest)
            elif getattr(args, "fabric_command", None) == "up":
                _parse(load_emulation_module("fabric_up").build_parser(), rest)
        except _Refused as exc:
            refused.append(f"{page.relative_to(REPO)}: {line}: {exc}")
        checked += 1
    assert not refused, "\n".join(refused)
    assert checked > 50, f"only {checked} commands checked: the extraction broke"


def test_every_make_target_shown_exists() -> None:
    targets = set(re.findall(r"^([a-zA-Z0-9_-]+):", (REPO / "Makefile").read_text(), flags=re.M))
    shown = {(page, line) for page, line in _commands("make")}
    missing = []
    for page, line in shown:
        argv = _runnable(line)
        for word in (argv or [])[1:]:
            if "=" not in word and not word.startswith("-") and word not in targets:
                missing.append(f"{page.relative_to(REPO)}: {line}")
    assert not missing, "\n".join(missing)
    assert len(shown) > 5


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_lead_to_files(page: Path) -> None:
    text = page.read_text()
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"{page.name}: {broken}"


def test_readme_is_a_front_page() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move detail into docs/"
    for page in sorted((REPO / "docs").glob("*.md")):
        assert f"docs/{page.name}" in "\n".join(lines), f"the README does not link docs/{page.name}"


#: README sections whose table comes from a committed run: every decimal figure in the table
#: must be one of the run's own figures (to the digits shown), so that text and run cannot drift
COMMITTED_RUNS = {"### Checkmate": "docs/checkmate-run.txt", "### TopoOpt": "docs/topoopt-run.txt",
                  "### Open MPI on the fabric": "docs/collectives-run.txt",
                  "### In-network aggregation": "docs/aggregation-run.txt"}


def _section(text: str, title: str) -> str:
    start = text.index(title)
    ends = [i for i in (text.find("\n### ", start + 4), text.find("\n## ", start + 4)) if i > 0]
    return text[start:min(ends)] if ends else text[start:]


def _decimals(text: str) -> list[str]:
    return re.findall(r"(?<![\d.])\d+\.\d+", text)


@pytest.mark.parametrize(("title", "run"), COMMITTED_RUNS.items(), ids=list(COMMITTED_RUNS))
def test_readme_figures_are_their_committed_runs(title: str, run: str) -> None:
    rows = [line for line in _section((REPO / "README.md").read_text(), title).splitlines()
            if line.startswith("|") and not line.startswith("| ---")][1:]
    figures = [x for row in rows for x in _decimals(row)]
    measured = _decimals((REPO / run).read_text())
    drifted = [x for x in figures if not any(f"{float(r):.{len(x.split('.')[1])}f}" == x for r in measured)]
    assert figures and not drifted, f"{title}: {drifted} are not in {run}"
