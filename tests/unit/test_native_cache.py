"""The native engine's cache index: a warm start finds the built engine by the program's
JSON without generating C, and a change to the generator or the C runtime misses and builds
again (a copy of the package changed on disk, run in a subprocess)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller.p4build import PROGRAM_DIRS, pipeline_files
from pybmv2.native import cache
from pybmv2.native.build import compiler
from pybmv2.native.cprogram import generate
from pybmv2.native.engine import NativeEngine
from pybmv2.program import Program
from pybmv2.startup import StartupPhases

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")

#: a small program: every build here compiles it
JSON = pipeline_files("direct_meter", PROGRAM_DIRS[1]).json


def test_a_second_engine_comes_from_the_index_without_generating(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MLFABRIC_NATIVE_CACHE", str(tmp_path))
    program = Program.from_file(JSON)
    first = NativeEngine(program)
    assert not first.from_index and list(tmp_path.glob("*.index"))
    phases = StartupPhases(origin=0.0)
    again = NativeEngine(Program.from_file(JSON), startup=phases)
    assert again.from_index and again.path == first.path
    assert again.manifest == first.manifest == generate(program)[1]
    assert "native: C generation" not in phases.milliseconds()
    first.close()
    again.close()


def test_a_program_without_its_json_text_is_generated(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MLFABRIC_NATIVE_CACHE", str(tmp_path))
    doc = json.loads(JSON.read_text())
    for _ in range(2):
        engine = NativeEngine(Program.from_json(doc))
        assert not engine.from_index
        engine.close()
    assert not list(tmp_path.glob("*.index"))


def test_a_damaged_index_entry_is_a_miss_and_is_rewritten(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MLFABRIC_NATIVE_CACHE", str(tmp_path))
    NativeEngine(Program.from_file(JSON)).close()
    (entry,) = tmp_path.glob("*.index")
    entry.write_bytes(b"not a pickle")
    engine = NativeEngine(Program.from_file(JSON))
    assert not engine.from_index
    engine.close()
    engine = NativeEngine(Program.from_file(JSON))
    assert engine.from_index
    engine.close()


def test_the_key_covers_json_generator_and_compiler(tmp_path) -> None:
    cc = compiler()
    assert cc is not None
    base = cache.index_key("a" * 64, cc, "f" * 64)
    assert base == cache.index_key("a" * 64, cc, "f" * 64)
    assert base != cache.index_key("b" * 64, cc, "f" * 64)
    assert base != cache.index_key("a" * 64, cc, "e" * 64)
    other = tmp_path / "cc"
    shutil.copy(os.path.realpath(cc), other)  # another file: another compiler
    assert base != cache.index_key("a" * 64, str(other), "f" * 64)


def _package_copy(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    shutil.copytree(cache.PACKAGE_ROOT, root / "pybmv2",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_the_fingerprint_follows_the_generator_and_the_runtime(tmp_path) -> None:
    pkg = _package_copy(tmp_path) / "pybmv2"
    before = cache.generator_fingerprint(pkg)
    assert before == cache.generator_fingerprint.__wrapped__(pkg)  # deterministic
    with open(pkg / "native" / "csrc" / "rt_api.c", "a") as f:
        f.write("/* changed */\n")
    after_runtime = cache.generator_fingerprint.__wrapped__(pkg)
    with open(pkg / "native" / "cexpr.py", "a") as f:
        f.write("# changed\n")
    after_generator = cache.generator_fingerprint.__wrapped__(pkg)
    assert len({before, after_runtime, after_generator}) == 3


_PROBE = """
import json, sys
from pybmv2.native.engine import NativeEngine
from pybmv2.program import Program
engine = NativeEngine(Program.from_file(sys.argv[1]))
print(json.dumps({"from_index": engine.from_index, "so": engine.path.name,
                  "marker": hasattr(engine._lib, "nx_cache_marker"),
                  "package": __import__("pybmv2").__file__}))
"""


def _start(src: Path, cache_dir: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "MLFABRIC_NATIVE_CACHE": str(cache_dir)}
    out = subprocess.run([sys.executable, "-c", _PROBE, str(JSON)], env=env, check=True, cwd=src,
                         capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout)


def test_a_changed_runtime_or_generator_builds_again(tmp_path) -> None:
    src = _package_copy(tmp_path)
    store = tmp_path / "cache"
    first = _start(src, store)
    assert first["package"].startswith(str(src)) and not first["from_index"]
    assert _start(src, store) == {**first, "from_index": True}
    # the C runtime changes: the index misses, and the new runtime is compiled in
    with open(src / "pybmv2" / "native" / "csrc" / "rt_api.c", "a") as f:
        f.write("NX_EXPORT int nx_cache_marker(void) { return 7; }\n")
    runtime = _start(src, store)
    assert not runtime["from_index"] and runtime["marker"] and runtime["so"] != first["so"]
    assert _start(src, store)["from_index"]
    # the generator changes (same C out): generated again, the shared object found by it
    with open(src / "pybmv2" / "native" / "cexpr.py", "a") as f:
        f.write("GENERATOR_CHANGED = True\n")
    generator = _start(src, store)
    assert not generator["from_index"] and generator["so"] == runtime["so"]
    assert _start(src, store)["from_index"]
