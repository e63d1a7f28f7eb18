"""A second fabric over a running one's interface names is refused before anything is created,
with a message that says which run holds them and how to stop it; the first keeps running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from controller.emulation import load_emulation_module
from controller.topology import optical

fabric_net = load_emulation_module("fabric_net")
REPO = Path(__file__).resolve().parents[2]

SECOND = """
import sys
from controller.emulation import load_emulation_module
EmulatedFabric = load_emulation_module("fabric_net").EmulatedFabric
from controller.errors import MlfabricError
from controller.topology import optical
try:
    EmulatedFabric(optical(2, 2, rate_mbps=None), target="{target}", shape=False, publish=False).start()
except MlfabricError as exc:
    print(exc)
    sys.exit(3)
"""


def test_a_second_fabric_on_the_same_names_is_refused_and_names_the_first(target_name: str) -> None:
    topo = optical(2, 2, rate_mbps=None)
    with fabric_net.EmulatedFabric(topo, target=target_name, shape=False, publish=False) as fab:
        proc = subprocess.run([sys.executable, "-c", SECOND.format(target=target_name)], cwd=REPO,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert "cannot start optical-2x2: interface" in proc.stdout
        assert f"is running (pid {os.getpid()}): stop it" in proc.stdout
        assert "Traceback" not in proc.stderr
        out = fab.host("h0_0").cmd("ping -c1 -W2 10.200.0.2")
    assert "1 received" in out, "the first fabric is untouched (same rack: no circuit needed)"


def test_an_experiment_refused_for_a_running_fabric_leaves_no_results_folder(target_name: str, tmp_path) -> None:
    from controller.topology import rail_only

    out = tmp_path / "results"
    with fabric_net.EmulatedFabric(rail_only(4, 4, rate_mbps=None), target=target_name, shape=False, publish=False):
        proc = subprocess.run([sys.executable, "-m", "controller.cli", "experiment", "run", "rail-only", "--target",
                               target_name, "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "interface" in proc.stderr and "is running" in proc.stderr, proc.stderr
    assert not out.exists(), "nothing was made"
