"""The documentation stays true: the CLI reference is the CLI's, every ``mlfabric`` and ``make``
command printed in the README and in docs/ parses against the CLI and the Makefile as it
stands, every relative link leads to a file, and the README stays a front page."""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import re
import shlex
from pathlib import Path

import pytest
from doc_figures import figures, untied

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
    """Every command line of the pages' code blocks starting with ``prefix``: a line ending in
    a backslash or leaving a ``[`` open goes on with the next; two commands on one line (set
    apart by two spaces) are two."""
    found = []
    for page in PAGES:
        if page.name == "cli.md":
            continue
        lines = [re.sub(r"^(\$|#)\s+", "", line) for line in _code_lines(page)]
        for i, line in enumerate(lines):
            if not line.startswith(f"{prefix} "):
                continue
            j = i
            while (line.endswith("\\") or line.count("[") > line.count("]")) and j + 1 < len(lines):
                j += 1
                line = line.rstrip("\\") + " " + lines[j]
            found += [(page, part) for part in re.split(rf"\s{{2,}}(?={prefix} )", line)]
    return found


#: a placeholder (TOPOLOGY, FILE, N, US) stands for a value; 1 is one of every option's types
_PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]*$")


def _variants(line: str) -> tuple[list[list[str]], bool] | None:
    """The commands a line shows, and whether it goes on (``...``), or None where it cannot be
    read as commands. A pattern becomes commands: ``[optional]`` parts are taken, ``<name>``
    and PLACEHOLDERS become values, and each alternative of ``a|b|c`` is one command."""
    line = re.split(r"\s+#\s", line, maxsplit=1)[0]
    line = re.split(r"\s(?:\||&&|;|>|2>)\s?", line, maxsplit=1)[0].strip()
    if "{" in line or "$(" in line:
        return None
    partial = "..." in line
    line = re.sub(r"<[^>]*>", "x", line.replace("[", " ").replace("]", " "))
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    words = [w for w in words if "..." not in w and w != "OPTIONS"]
    words = ["1" if _PLACEHOLDER.match(w) and i > 1 else w for i, w in enumerate(words)]
    first = [w.split("|")[0] for w in words]
    variants = [first]
    for i, w in enumerate(words):
        for alternative in w.split("|")[1:]:
            variants.append([*first[:i], alternative, *first[i + 1:]])
    return variants, partial


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
        read = _variants(line)
        assert read is not None, f"{page.relative_to(REPO)}: {line}: cannot be read as a command"
        variants, partial = read
        for argv in variants:
            try:
                _parse_all(parser, argv[1:])
            except _Refused as exc:
                if not (partial and "required" in str(exc)):  # '...': the rest is not shown
                    refused.append(f"{page.relative_to(REPO)}: {line}: {' '.join(argv)}: {exc}")
            checked += 1
    assert not refused, "\n".join(refused)
    assert checked > 90, f"only {checked} commands checked: the extraction broke"


def _parse_all(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """The CLI's parser, then an experiment's or ``fabric up``'s own with the rest."""
    args = _parse(parser, argv)
    rest = [w for w in getattr(args, "rest", []) if w != "--"]
    if getattr(args, "command", None) == "experiment" and getattr(args, "name", None):
        _parse(load_emulation_module(EXPERIMENT_MODULES[args.name]).build_parser(), rest)
    elif getattr(args, "fabric_command", None) == "up":
        _parse(load_emulation_module("fabric_up").build_parser(), rest)


def test_every_make_target_shown_exists() -> None:
    targets = set(re.findall(r"^([a-zA-Z0-9_-]+):", (REPO / "Makefile").read_text(), flags=re.M))
    shown = {(page, line) for page, line in _commands("make")}
    missing = []
    for page, line in shown:
        read = _variants(line)
        assert read is not None, f"{page.relative_to(REPO)}: {line}: cannot be read as a command"
        for argv in read[0]:
            if any("=" not in w and not w.startswith("-") and w not in targets for w in argv[1:]):
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


#: tables that come from a committed run: (page, the text the table follows, the run). Every
#: figure of the first table after that text but in its first column, which names the row
#: (decimals, percentages and integers, see doc_figures), must be a value of the run, of its
#: kind, at the table's rounding
COMMITTED_TABLES = [
    ("README.md", "### Checkmate", "docs/checkmate-run.txt"),
    ("README.md", "### Reconfigurable fabrics", "docs/rotor-run.txt"),
    ("README.md", "### TDTCP", "docs/tdtcp-run.txt"),
    ("README.md", "### TopoOpt", "docs/topoopt-run.txt"),
    ("README.md", "### Open MPI on the fabric", "docs/collectives-run.txt"),
    ("README.md", "### In-network aggregation", "docs/aggregation-run.txt"),
    ("docs/reconfigurable.md", "From `make run-rotor` (native engine", "docs/rotor-run.txt"),
    ("docs/rotor-results.md", "## Python target (calendar queues)", "docs/rotor-run.txt"),
    ("docs/tdtcp.md", "From `make run-tdtcp`, native engine", "docs/tdtcp-run.txt"),
    ("docs/checkmate.md", "## What it measured", "docs/checkmate-run.txt"),
    ("docs/topoopt.md", "## The experiment: `make run-topoopt`", "docs/topoopt-run.txt"),
    ("docs/launch.md", "## The collectives experiment", "docs/collectives-run.txt"),
    ("docs/aggregation.md", "## The experiment: `make run-aggregation`", "docs/aggregation-run.txt"),
    ("docs/rail-only.md", "## Load balancing in the fat-tree", "docs/rail-only-balancing-run.txt"),
    ("docs/cluster.md", "`cluster plan` also runs Mininet's cluster edition's own placers", "docs/cluster-plans.txt"),
]
#: prose and printed output that come from a committed run: (page, where it starts, where it
#: ends (None: at the next heading), the run); every figure in between (decimals, percentages and
#: integers) must be a value of the run of its kind at the page's rounding, and every line of a
#: code block there a line of the run
COMMITTED_TEXT = [
    ("README.md", "### Rail-only (`make run`)", "At the paper's", "docs/rail-only-run.txt"),
    ("README.md", "its native engine), and ends with its verdicts", "The full output", "docs/rail-only-run.txt"),
    ("docs/rail-only.md", "so both comparisons are **decided**", "**The rest of this page is from 16 Mbit/s",
     "docs/rail-only-run.txt"),
    ("docs/rail-only.md", "- **Balanced uplinks, the same all-to-all.**", "  Turning off TCP's slow start",
     "docs/rail-only-balancing-run.txt"),
    ("docs/rail-only.md", "  Turning off TCP's slow start", "  transport leaves the NICs idle",
     "docs/rail-only-no-slow-start-run.txt"),
    ("README.md", "Under the load balancing AI fabrics use", "![collectives, make run]",
     "docs/rail-only-balancing-run.txt"),
    ("docs/tdtcp.md", "Twelve repetitions in one run", "A baseline's transfer varies", "docs/tdtcp-run-12.txt"),
    ("docs/reconfigurable.md", "  run now also prints the throughput", "- **The ring all-reduce got slower",
     "docs/rotor-level-run.txt"),
    ("docs/checkmate.md", "  ([checkmate-run-compute30.txt]", "  The paper's jobs give Gemini less",
     "docs/checkmate-run-compute30.txt"),
    ("docs/tdtcp.md", "  transfers of 3 s each; the machine at most", "- **DCTCP and MPTCP did not run.**",
     "docs/tdtcp-day-run.txt"),
    ("docs/rail-only.md", "## At 1,024 GPUs: a scale check", "Getting there took", "docs/rail-only-1024-run.txt"),
    ("docs/cluster.md", "## A worked example on two stand-ins", None, "docs/cluster-run.txt"),
    ("docs/cluster.md", "### Against one machine", None, "docs/rail-only-run.txt"),
]


def _section(text: str, start_at: str) -> str:
    start = text.index(start_at)
    ends = [i for i in (text.find("\n### ", start + 4), text.find("\n## ", start + 4)) if i > 0]
    return text[start:min(ends)] if ends else text[start:]


@pytest.mark.parametrize(("page", "start_at", "run"), COMMITTED_TABLES,
                         ids=[f"{p}:{t}" for p, t, _ in COMMITTED_TABLES])
def test_tables_are_their_committed_runs(page: str, start_at: str, run: str) -> None:
    lines = _section((REPO / page).read_text(), start_at).splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = list(itertools.takewhile(lambda line: line.startswith("|"), lines[first:]))
    shown = [f for row in table[2:] for f in figures(row.split("|", 2)[-1])]  # the first column names the row
    drifted = untied(shown, (REPO / run).read_text())
    assert shown and not drifted, f"{page}, {start_at}: {drifted} are not in {run}"


@pytest.mark.parametrize(("page", "start_at", "end_at", "run"), COMMITTED_TEXT,
                         ids=[f"{p}:{t}" for p, t, _, _ in COMMITTED_TEXT])
def test_text_is_its_committed_run(page: str, start_at: str, end_at: str | None, run: str) -> None:
    section = _section((REPO / page).read_text(), start_at)
    if end_at is not None:
        section = section[:section.index(end_at)]
    blocks = section.split("```")
    prose, code = "".join(blocks[0::2]), [line for b in blocks[1::2] for line in b.splitlines()[1:]]
    shown = figures(prose)
    drifted = untied(shown, (REPO / run).read_text())
    assert (shown or code) and not drifted, f"{page}, {start_at}: {drifted} are not in {run}"
    lines = {line.strip() for line in (REPO / run).read_text().splitlines()}
    missing = [line for line in code if line.strip() and "..." not in line and "<" not in line
               and line.strip() not in lines]
    assert not missing, f"{page}, {start_at}: printed lines not in {run}: {missing}"
