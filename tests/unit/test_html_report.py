"""A results folder's index.html: the verdicts first, everything embedded, nothing unescaped."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

from controller.experiments.html_report import (
    MAX_EMBEDDED_BYTES,
    FolderContents,
    read_folder,
    render,
    write_index,
)

REPO = Path(__file__).resolve().parents[2]
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")


def _summary(decided: bool, interrupted: str | None = None) -> dict:
    verdict = {"comparison": "allreduce <b>", "decided": decided, "outcomes": ["decided"] if decided else ["too few runs"],
               "figures_say": "rail-only is even", "verdict": "rail-only is even",
               "runs": [{"configuration": "rail-only", "ok": 3, "total": 3}]}
    return {"config": {"gpus": 16, "rate_mbps": 100.0}, "interrupted": interrupted,
            "fidelity": {"limits": {"machine_cpu": 0.6}, "all_decided": decided, "verdicts": [verdict]},
            "regime": {"real": {"nic_gbps": 400, "hop_latency_us": 1, "mtu": 9000}, "dilation": 4000,
                       "quantities": [{"name": "frame", "unit": "us", "real": 0.18, "emulated": 0.18, "scaled": True}]}}


def test_the_headline_says_decided_undecided_or_interrupted() -> None:
    assert "all 1 comparisons decided" in render(FolderContents("run", "summary.json", _summary(True), "t"))
    assert "0 of 1 comparisons decided" in render(FolderContents("run", "summary.json", _summary(False), "t"))
    page = render(FolderContents("run", "summary.json", _summary(True, "SIGTERM"), "t"))
    assert "interrupted (SIGTERM): partial results" in page
    assert "no verdicts in this folder" in render(FolderContents("run", None, None, None))


def test_text_from_the_run_is_escaped_and_the_regime_and_config_are_shown() -> None:
    page = render(FolderContents("run", "summary.json", _summary(True), "a < b & c"))
    assert "allreduce &lt;b&gt;" in page and "a &lt; b &amp; c" in page and "<b>" not in page.replace("<body>", "")
    assert "time stretched 4,000x" in page and "<td>0.18 us</td>" in page and "rate_mbps" in page


def test_a_folder_becomes_one_self_contained_page(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps(_summary(True)))
    (tmp_path / "table.txt").write_text("the table\n")
    (tmp_path / "plot.png").write_bytes(PNG)
    (tmp_path / "runs.csv").write_text("a,b\n1,2\n")
    (tmp_path / "huge.csv").write_bytes(b"x" * (MAX_EMBEDDED_BYTES + 1))
    page = write_index(tmp_path).read_text()
    assert f"src='data:image/png;base64,{base64.b64encode(PNG).decode()}'" in page
    assert f"href='data:text/csv;base64,{base64.b64encode(b'a,b' + bytes([10]) + b'1,2' + bytes([10])).decode()}'" in page
    assert "href='huge.csv'" in page and "too large to embed" in page
    assert not re.search(r"(src|href)='(?!data:|huge\.csv)", page), "nothing but the folder's own large files is linked"
    assert read_folder(tmp_path).summary_name == "summary.json"


def test_the_cli_rebuilds_a_page_and_refuses_a_missing_folder(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text(json.dumps(_summary(False)))
    done = subprocess.run([sys.executable, "-m", "controller.cli", "report", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and (tmp_path / "index.html").exists(), done.stderr
    bad = subprocess.run([sys.executable, "-m", "controller.cli", "report", str(tmp_path / "nope")], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "not a directory" in bad.stderr and "Traceback" not in bad.stderr


def test_a_folder_of_runs_gets_a_listing_newest_first_and_each_run_its_page(tmp_path: Path) -> None:
    import os

    for i, (name, decided) in enumerate([("rail-only-1", True), ("topoopt-2", False)]):
        run = tmp_path / name
        run.mkdir()
        (run / "summary.json").write_text(json.dumps(_summary(decided)))
        os.utime(run / "summary.json", (1_000_000 + i, 1_000_000 + i))
    (tmp_path / "not-a-run").mkdir()
    done = subprocess.run([sys.executable, "-m", "controller.cli", "report", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    listing = (tmp_path / "index.html").read_text()
    assert listing.index("topoopt-2/index.html") < listing.index("rail-only-1/index.html")
    assert "0 of 1 comparisons decided" in listing and "all 1 comparisons decided" in listing
    assert "not-a-run" not in listing and "2 runs" in listing
    assert (tmp_path / "rail-only-1" / "index.html").exists() and (tmp_path / "topoopt-2" / "index.html").exists()
    again = subprocess.run([sys.executable, "-m", "controller.cli", "report", str(tmp_path)], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and (tmp_path / "index.html").read_text() == listing  # pages do not reorder it


def test_a_kept_dashboard_is_named_with_the_command_that_replays_it(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps(_summary(True)))
    assert "--replay" not in write_index(tmp_path).read_text()
    (tmp_path / "dashboard.sqlite").write_bytes(b"")
    assert f"mlfabric dashboard --replay {tmp_path.name}" in write_index(tmp_path).read_text()
