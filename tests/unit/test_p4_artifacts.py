"""Compiled pipelines must match their sources: a stale artifact fails, with or without p4c."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from controller.p4build import PROGRAM_DIRS, local_includes, stale_sources


@pytest.mark.parametrize("directory", PROGRAM_DIRS, ids=lambda p: p.name)
def test_compiled_pipelines_match_their_sources(directory: Path) -> None:
    stale = stale_sources(directory)
    assert not stale, "stale P4 artifacts (run `make p4`):\n" + "\n".join(map(str, stale))


def _copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_editing_an_include_is_detected(tmp_path: Path) -> None:
    tree = _copy_tree(PROGRAM_DIRS[0], tmp_path / "p4src")
    header = tree / "include" / "headers.p4"
    header.write_text(header.read_text() + "\n// edited\n")
    stale = stale_sources(tree)
    assert [s.path.name for s in stale] == ["headers.p4"]
    assert "run `make p4`" in str(stale[0])


def test_a_new_program_without_artifacts_is_detected(tmp_path: Path) -> None:
    tree = _copy_tree(PROGRAM_DIRS[0], tmp_path / "p4src")
    (tree / "brand_new.p4").write_text("// not compiled yet\n")
    assert any(s.path.name == "brand_new.p4" and "not in the manifest" in s.reason for s in stale_sources(tree))


def test_a_hand_edited_artifact_is_detected(tmp_path: Path) -> None:
    tree = _copy_tree(PROGRAM_DIRS[0], tmp_path / "p4src")
    manifest = json.loads((tree / "build" / "manifest.json").read_text())
    name = next(iter(manifest["programs"]))
    art = tree / "build" / f"{name}.json"
    art.write_text(art.read_text().replace("{", "{ ", 1))
    assert any(s.path == art for s in stale_sources(tree))


def test_local_includes_are_followed_transitively() -> None:
    names = {p.name for p in local_includes(PROGRAM_DIRS[0] / "rail_switch.p4")}
    assert {"headers.p4", "parser.p4"} <= names
