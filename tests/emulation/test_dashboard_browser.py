"""The dashboard and the results pages as a person sees them, in Debian's Chromium (headless):
``fabric up --dashboard`` prints a URL whose page draws the fabric and shows a link's rate rise
while ``host exec`` runs iperf3, and a switch's tables when it is clicked; an optical fabric's
page shows its schedule and a reconfiguration on the time line; ``experiment run --dashboard``
shows the run's progress and verdicts, keeps them, and ``dashboard --replay`` shows them again;
a results folder's index.html opens from the file system. With MLFABRIC_SCREENSHOTS=docs/img
the screenshots in docs/dashboard.md are remade."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from browser import chromium, screenshot, wait_for
from fabric_process import wait_until_published

from controller.dashboard.live import LiveSampler
from controller.dashboard.rates import link_name
from controller.dashboard.recorder import FILE_NAME, Recording
from controller.dashboard.server import Dashboard
from controller.emulation import load_emulation_module
from controller.reconfigure.apply import reconfigure
from controller.schedule import round_robin
from controller.topology import load_topology, optical

REPO = Path(__file__).resolve().parents[2]
FABRIC = REPO / "topologies" / "rail-only-4x4.yaml"

fabric_net = load_emulation_module("fabric_net")


def _cli_env(state: Path) -> dict[str, str]:
    return {**os.environ, "MLFABRIC_STATE_DIR": str(state), "PYTHONUNBUFFERED": "1"}


def _url_from(proc: subprocess.Popen[str], lines: list[str]) -> str:
    """The URL a process prints as ``dashboard: URL`` (its output so far kept in ``lines``)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        found = re.search(r"^dashboard.*?: (http://\S+)", line)
        if found:
            return found.group(1)
    raise AssertionError("no dashboard URL printed:\n" + "".join(lines))


def _drain(proc: subprocess.Popen[str], lines: list[str]) -> threading.Thread:
    """Keeps reading a process's output (so that it never blocks on a full pipe)."""
    def read() -> None:
        assert proc.stdout is not None
        lines.extend(proc.stdout)
    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def _mbps(driver, link: str) -> float:
    return float(driver.find_element("css selector", f"line[data-link='{link}']").get_attribute("data-mbps") or 0)


def test_fabric_up_dashboard_shows_a_link_rising_under_iperf3_and_a_switchs_tables(target_name: str,
                                                                                     tmp_path: Path) -> None:
    topo = load_topology(FABRIC)
    env = _cli_env(tmp_path)
    fabric = subprocess.Popen([sys.executable, "-m", "controller.cli", "fabric", "up", str(FABRIC), "--target",
                               target_name, "--dashboard", "--dashboard-port", "0"], cwd=REPO, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines: list[str] = []
    server = client = None
    try:
        url = _url_from(fabric, lines)
        reader = _drain(fabric, lines)
        wait_until_published(fabric, tmp_path / "current-fabric.yaml", timeout=90)
        receiver = topo.hosts[1].nics[0].address
        nic = f"s0:{topo.host('s0').nics[0].name}"  # s1's rail-0 address is reached over s0's rail-0 NIC
        link = next(link_name(lk) for lk in topo.links if nic in (str(lk.a), str(lk.b)))
        with chromium() as driver:
            driver.get(url)
            wait_for(lambda: len(driver.find_elements("css selector", "line.link")) == len(topo.links),
                     f"the {len(topo.links)} links of {topo.name}")
            assert "rail-only-4x4" in driver.find_element("id", "title").text
            wait_for(lambda: driver.find_elements("css selector", "#switches tr[data-switch='rail0']"),
                     "rail0 in the switches table")
            assert _mbps(driver, link) < 1
            host = [sys.executable, "-m", "controller.cli", "host", "exec"]
            server = subprocess.Popen([*host, "s1", "--", "iperf3", "-s", "-1", "-p", "5201"], cwd=REPO, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            subprocess.run([*host, "s0", "--", "ping", "-c", "1", "-W", "2", receiver], cwd=REPO, env=env,
                           capture_output=True, timeout=60)
            client = subprocess.Popen([*host, "s0", "--", "iperf3", "-c", receiver, "-p", "5201", "-u", "-b", "50M",
                                       "-t", "8"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            wait_for(lambda: _mbps(driver, link) > 30, f"{link} carrying iperf3's 50 Mbit/s", timeout=20)
            colour = driver.find_element("css selector", f"line[data-link='{link}']").value_of_css_property("stroke")
            busiest = driver.find_element("css selector", "#busiest tbody tr td").text
            screenshot(driver, "dashboard-fabric.png")
            driver.find_element("css selector", "#switches tr[data-switch='rail0']").click()
            sizes = wait_for(lambda: driver.find_elements("css selector", "#table-sizes td"), "rail0's tables")
            table_text = " ".join(td.text for td in sizes)
            client.wait(timeout=30)
    finally:
        for proc in (client, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        fabric.send_signal(signal.SIGINT)
        fabric.wait(timeout=60)
    reader.join(timeout=10)
    assert fabric.returncode == 0, "".join(lines)[-3000:]
    assert colour not in ("rgb(201, 204, 216)", ""), colour  # not the grey of an idle link
    assert busiest == link
    assert "RailIngress" in table_text and re.search(r"\b[1-9]\d*\b", table_text), table_text


def test_an_optical_fabrics_page_shows_its_schedule_and_a_reconfiguration(
        target_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFABRIC_STATE_DIR", str(tmp_path))  # a journal of this test's events only
    old = round_robin(4, slice_us=40_000, night_us=4_000, name="old")
    new = round_robin(4, slice_us=20_000, night_us=2_000, name="new")
    with fabric_net.EmulatedFabric(optical(4, 1, uplinks=1, rate_mbps=None), target=target_name, shape=False,
                                   publish=False, schedule=old) as fab, \
            Dashboard(LiveSampler(0.5), port=0) as board, chromium() as driver:
        driver.get(board.url)
        wait_for(lambda: "old" in driver.find_element("id", "schedule").text, "the schedule 'old'")
        assert "circuit switch 0: " in driver.find_element("id", "schedule").text
        reconfigure(fab.live, new)
        wait_for(lambda: driver.find_elements("css selector", "#timeline rect[data-kind='reconfiguration']"
                                                              "[data-phase='clean-up']"), "the reconfiguration's end")
        wait_for(lambda: "new" in driver.find_element("id", "schedule").text, "the schedule 'new'")
        phases = {e.get_attribute("data-phase")
                  for e in driver.find_elements("css selector", "#timeline rect[data-kind='reconfiguration']")}
        events = driver.find_element("id", "events").text
        screenshot(driver, "dashboard-reconfiguration.png")
    assert {"commit", "cut", "finish", "clean-up"} <= phases, phases
    assert "reconfiguration to new: clean-up" in events


def test_an_experiment_with_dashboard_shows_its_progress_and_verdicts_and_replays(target_name: str,
                                                                                   tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = _cli_env(tmp_path / "state")
    lines: list[str] = []
    with chromium() as driver:  # up before the run starts: the page is open long before the run ends
        run = subprocess.Popen([sys.executable, "-m", "controller.cli", "experiment", "run", "rail-only", "--gpus",
                                "4", "--rails", "2", "--iterations", "5", "--allreduce-kb", "32", "--alltoall-kb",
                                "32", "--super-frames", "0", "--target", target_name, "--out", str(out), "--dashboard",
                                "--dashboard-port", "0"], cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            url = _url_from(run, lines)
            reader = _drain(run, lines)
            driver.get(url)
            # the page's last sample is the run's last (sent as the dashboard stops): its end,
            # its verdicts, and every unit on the time line, however late the page connected
            def ended() -> str | None:
                assert run.poll() in (None, 0, 3), "".join(lines)[-3000:]  # a run that failed says why
                shown = driver.find_element("id", "run").get_attribute("data-status")
                return shown if shown not in ("", "running") else None

            status = wait_for(ended, "the run's end", timeout=240)
            progress = driver.find_element("id", "run").text
            units = driver.find_elements("css selector", "#timeline rect[data-kind='unit']")
            comparisons = {v.get_attribute("data-comparison")
                           for v in driver.find_elements("css selector", "#verdicts tr[data-comparison]")}
            assert run.wait(timeout=120) in (0, 3), "".join(lines)[-3000:]
        finally:
            if run.poll() is None:
                run.send_signal(signal.SIGTERM)
                run.wait(timeout=60)
    reader.join(timeout=10)
    assert progress.startswith(f"rail-only: {status}, unit 2 of 2: fat-tree"), progress
    assert len(units) == 2 and comparisons == {"allreduce", "alltoall"}, (len(units), comparisons)
    summary = json.loads((out / "summary.json").read_text())
    assert status == ("decided" if summary["fidelity"]["all_decided"] else "undecided")
    assert "dashboard: its sampler used" in (out / "table.txt").read_text()
    kept = Recording(out / FILE_NAME)
    assert kept.events()[0]["kind"] == "run" and len(kept.samples()) >= 3

    replay = subprocess.Popen([sys.executable, "-m", "controller.cli", "dashboard", "--replay", str(out), "--speed",
                               "50", "--port", "0"], cwd=REPO, env=env, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    lines = []
    try:
        url = _url_from(replay, lines)
        with chromium() as driver:
            driver.get(url)
            wait_for(lambda: f"replay of {out}" in driver.find_element("id", "status").text, "the replay")
            wait_for(lambda: driver.find_elements("css selector", "#verdicts tr[data-comparison='allreduce']"),
                     "the replayed verdicts", timeout=60)
    finally:
        replay.send_signal(signal.SIGINT)
        replay.wait(timeout=30)
    assert replay.returncode == 0, "".join(lines)


def test_a_results_page_opens_from_the_file_system_with_its_verdicts_and_plots(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFABRIC_STATE_DIR", str(tmp_path / "state"))  # its verdicts' events stay here
    import matplotlib

    from controller.experiments.core import write_outcome
    from controller.experiments.fidelity import Runs, Verdict
    from controller.experiments.html_report import write_index
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    verdicts = [Verdict("allreduce", "rail-only is even", 4, 0, runs=(Runs("rail-only", 3, 3), Runs("fat-tree", 3, 3)),
                        needed=2),
                Verdict("alltoall", "rail-only is faster", 4, 0, runs=(Runs("rail-only", 1, 3), Runs("fat-tree", 3, 3)),
                        needed=2)]
    write_outcome(tmp_path, "collective  ratio\nallreduce  1.001", {"config": {"gpus": 4}}, verdicts)
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [1, 4, 9])
    fig.savefig(tmp_path / "collectives.png")
    plt.close(fig)
    page = write_index(tmp_path)
    with chromium() as driver:
        driver.get(page.as_uri())
        body = driver.find_element("tag name", "body").text
        widths = [img.get_property("naturalWidth") for img in driver.find_elements("tag name", "img")]
        screenshot(driver, "results-page.png")
    assert "rail-only is even" in body and "too few runs" in body and "1 of 2 comparisons decided" in body
    assert widths and all(w > 100 for w in widths), widths
