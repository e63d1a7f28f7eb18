"""Bad input gets one line naming the file, the key and the problem, and a failing exit code;
with ``--json`` also a JSON document on stdout. Never a traceback, never the file's contents."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from controller.cli import main
from controller.yamlfile import read_yaml

REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "topologies" / "rail-only-4x4.yaml"


def _one_line(capsys, argv: list[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("mlfabric: error: "), err
    assert "Traceback" not in err
    return rc, out, err


@pytest.mark.parametrize(("content", "expect"), [
    (bytes(range(256)) * 4, "is not UTF-8 text"),
    (b"", "is empty"),
    (b"  \n\n", "is empty"),
    (b"name: [x\n", "not valid YAML at line 2, column 1"),
    (b"name: t\nkind: rail-only\nhosts: []\nswitches: []\nlinks: []\ntypo: " + b"y" * 5000 + b"\n", "typo"),
])
def test_a_bad_topology_file_is_one_line(tmp_path, capsys, content: bytes, expect: str) -> None:
    f = tmp_path / "t.yaml"
    f.write_bytes(content)
    rc, _, err = _one_line(capsys, ["topology", "check", str(f)])
    assert rc == 1 and expect in err and str(f) in err
    assert len(err) < 400, "the error carries no file contents"


def test_a_missing_file_and_an_oversized_one(tmp_path, capsys) -> None:
    rc, _, err = _one_line(capsys, ["topology", "check", str(tmp_path / "nope.yaml")])
    assert rc == 1 and "cannot read it: No such file or directory" in err and "(got None)" not in err
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: b\n" * 10)
    with pytest.raises(Exception, match="larger than 0 MB"):
        read_yaml(big, max_bytes=10)


def test_json_errors_go_to_stdout_too(tmp_path, capsys) -> None:
    f = tmp_path / "empty.yaml"
    f.write_text("")
    rc, out, _ = _one_line(capsys, ["topology", "check", str(f), "--json"])
    assert rc == 1 and json.loads(out) == {"ok": False, "error": f"{f}: file: is empty"}


def test_outputs_that_cannot_be_written_are_one_line(tmp_path, capsys) -> None:
    rc, _, err = _one_line(capsys, ["topology", "draw", str(TOPO), "-o", str(tmp_path / "x.txt")])
    assert rc == 1 and "draws .png, .pdf, .svg files, not .txt" in err
    rc, _, err = _one_line(capsys, ["topology", "draw", str(TOPO), "-o", "/nonexistent/x.png"])
    assert rc == 1 and "/nonexistent/x.png: No such file or directory" in err
    rc, _, err = _one_line(capsys, ["topology", "gen", "rail-only", "--servers", "2", "--gpus", "2", "-o",
                                    "/nonexistent/x.yaml"])
    assert rc == 1 and "/nonexistent/x.yaml" in err


def test_a_reader_that_goes_away_is_no_error(monkeypatch, capsys) -> None:
    """The reader of stdout closed (``| head``): the command ends quietly, with no traceback."""

    class Closed:
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self) -> int:
            return sys.__stdout__.fileno()

    silenced: list[bool] = []
    cli_main = sys.modules["controller.cli.main"]  # the module (``controller.cli.main`` names the function)
    monkeypatch.setattr(cli_main, "_silence_stdout", lambda: silenced.append(True))
    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["topology", "show", str(TOPO)]) == 0
    assert silenced == [True]


def test_a_monster_topology_is_refused_before_it_is_walked() -> None:
    from controller.errors import ConfigError
    from controller.topology.loader import MAX_ITEMS, parse_topology

    doc = {"name": "huge", "hosts": [{"name": "h", "nics": []}] * (MAX_ITEMS + 1), "switches": [], "links": []}
    with pytest.raises(ConfigError, match=r"hosts: more than 200,000: no fabric mlfabric compiles"):
        parse_topology(doc, "huge.yaml")
