"""The layers point one way (docs/contributing.md): ``mlfabric_base`` imports no other package
of the project; the workloads and the Python target never import the controller; nothing
reaches the Mininet layer by putting ``mininet/`` on ``sys.path`` (it is the package
``mlfabric_emulation``)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT = ("mlfabric_base", "controller", "workloads", "pybmv2", "packettest", "mlfabric_emulation", "bench")


def _imports(package: str) -> dict[str, set[str]]:
    """Each module file of ``package`` (its folder) and the project packages it imports."""
    out: dict[str, set[str]] = {}
    folder = REPO / ("mininet" if package == "mlfabric_emulation" else package)
    for path in folder.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
        out[str(path.relative_to(REPO))] = names & set(PROJECT)
    return out


def test_the_base_imports_no_other_layer() -> None:
    bad = {f: n - {"mlfabric_base"} for f, n in _imports("mlfabric_base").items() if n - {"mlfabric_base"}}
    assert not bad


def test_the_workloads_and_the_python_target_never_import_the_controller() -> None:
    for package in ("workloads", "pybmv2"):
        bad = {f: n for f, n in _imports(package).items() if "controller" in n or "mlfabric_emulation" in n}
        assert not bad, f"{package} reaches up: {bad}"


def test_nothing_puts_mininet_on_the_path() -> None:
    for package in PROJECT:
        folder = REPO / ("mininet" if package == "mlfabric_emulation" else package)
        for path in folder.rglob("*.py"):
            text = path.read_text()
            assert "sys.path.insert" not in text and "sys.path.append" not in text, path
