"""The P4 build flow: compile the project's programs and keep a manifest of their sources.

Each program directory (``p4src/`` and the test programs in ``tests/p4programs/``) has a
``build/`` folder holding, per program, the BMv2 JSON, the P4Info in text format and one
``manifest.json`` with the sha256 of every source that went in (the program and the local
files it includes) and the p4c version. :func:`stale_sources` compares a directory with its
manifest without p4c, so that a stale artifact fails the tests on any machine.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from controller.errors import P4BuildError, ToolchainMissing
from controller.toolchain import find_tool

__all__ = [
    "MANIFEST",
    "PROGRAM_DIRS",
    "Artifact",
    "Stale",
    "compile_all",
    "local_includes",
    "pipeline_files",
    "stale_sources",
]

REPO = Path(__file__).resolve().parent.parent
#: directories whose top-level .p4 files are programs, each compiled into DIR/build/
PROGRAM_DIRS = (REPO / "p4src", REPO / "tests" / "p4programs")
MANIFEST = "manifest.json"
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Artifact:
    """The compiled files of one program."""

    name: str
    json: Path
    p4info: Path


@dataclass(frozen=True, slots=True)
class Stale:
    """A source file that no longer matches the manifest (or is missing from it)."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def local_includes(source: Path) -> list[Path]:
    """Every file ``source`` includes with ``#include "..."``, transitively, sorted.

    System includes (``<core.p4>``) come from p4c and are not part of the manifest.
    """
    seen: set[Path] = set()
    todo = [source]
    while todo:
        current = todo.pop()
        for name in _INCLUDE.findall(current.read_text()):
            candidate = (current.parent / name).resolve()
            if candidate.exists() and candidate not in seen:
                seen.add(candidate)
                todo.append(candidate)
    return sorted(seen)


def programs_in(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.p4"))


def pipeline_files(name: str, directory: Path = PROGRAM_DIRS[0]) -> Artifact:
    """The committed JSON and P4Info of program ``name`` (they may not exist yet)."""
    build = directory / "build"
    return Artifact(name, build / f"{name}.json", build / f"{name}.p4info.txtpb")


def _inputs(program: Path, directory: Path) -> dict[str, str]:
    files = [program.resolve(), *local_includes(program)]
    return {str(f.relative_to(directory.resolve())): sha256(f) for f in files}


def stale_sources(directory: Path) -> list[Stale]:
    """Sources in ``directory`` whose compiled artifacts are missing or out of date."""
    manifest_path = directory / "build" / MANIFEST
    programs = programs_in(directory)
    if not programs:
        return []
    if not manifest_path.exists():
        return [Stale(p, "no build/manifest.json: run `make p4`") for p in programs]
    manifest = json.loads(manifest_path.read_text())
    recorded: dict[str, dict] = manifest.get("programs", {})
    problems: list[Stale] = []
    for program in programs:
        entry = recorded.get(program.stem)
        if entry is None:
            problems.append(Stale(program, "not in the manifest: run `make p4`"))
            continue
        current = _inputs(program, directory)
        for rel, digest in current.items():
            if entry["inputs"].get(rel) != digest:
                problems.append(
                    Stale(directory / rel, f"changed since {program.name} was compiled: run `make p4`")
                )
        art = pipeline_files(program.stem, directory)
        for out in (art.json, art.p4info):
            if not out.exists():
                problems.append(Stale(out, "compiled artifact missing: run `make p4`"))
            elif entry["outputs"].get(out.name) != sha256(out):
                problems.append(Stale(out, "edited by hand or left over: run `make p4`"))
    # Deduplicate (an include shared by two programs is reported once).
    unique: dict[str, Stale] = {}
    for item in problems:
        unique.setdefault(str(item.path), item)
    return list(unique.values())


def _compile(p4c: str, program: Path) -> Artifact:
    art = pipeline_files(program.stem, program.parent)
    # Run from the program's folder with relative paths, so that the source_info p4c
    # records in the JSON does not depend on where the repository is checked out.
    cmd = [
        p4c, "--std", "p4-16", "--target", "bmv2", "--arch", "v1model",
        "--p4runtime-files", f"build/{art.p4info.name}", "-o", f"build/{art.json.name}", program.name,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=program.parent)
    if proc.returncode != 0:
        raise P4BuildError(f"p4c failed on {program}:\n{proc.stderr.strip()}")
    return art


def compile_all(directories: Iterable[Path] = PROGRAM_DIRS) -> list[Artifact]:
    """Compile every program with p4c-bm2-ss and rewrite each directory's manifest."""
    tool = find_tool("p4c-bm2-ss")
    if not tool.present or tool.path is None:
        raise ToolchainMissing(
            "p4c-bm2-ss is not installed (it is not in the package registries: build p4c "
            "from source with the bmv2 backend, or use the committed artifacts)"
        )
    built: list[Artifact] = []
    for directory in directories:
        programs = programs_in(directory)
        if not programs:
            continue
        build = directory / "build"
        build.mkdir(exist_ok=True)
        manifest: dict = {"p4c": tool.version, "programs": {}}
        for program in programs:
            art = _compile(tool.path, program)
            manifest["programs"][program.stem] = {
                "source": program.name,
                "inputs": _inputs(program, directory),
                "outputs": {f.name: sha256(f) for f in (art.json, art.p4info)},
            }
            built.append(art)
        (build / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return built
