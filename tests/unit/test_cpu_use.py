"""Switch and machine CPU shares: the arithmetic, the /proc readings, the engine in a log."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from controller.emulation import load_emulation_module
from controller.experiments.cpu_use import CpuSample, cpu_row, cpu_summary, cpu_use, cpu_verdict

pytestmark = pytest.mark.unit

_sampler = load_emulation_module("cpu_sampler")
_engines = load_emulation_module("switch_engines")
CpuSampler, machine_cpu_s, process_cpu_s = _sampler.CpuSampler, _sampler.machine_cpu_s, _sampler.process_cpu_s
NATIVE_LINE, engine_from_log, fabric_engines = _engines.NATIVE_LINE, _engines.engine_from_log, _engines.fabric_engines

_BURN = ("import time\n"
         "while time.process_time() < 0.3: pass\n"
         "print('done', flush=True)\n"
         "input()\n")  # holds on (alive, idle) until its stdin closes


def test_a_process_that_burned_cpu_reads_at_least_what_it_burned() -> None:
    child = subprocess.Popen([sys.executable, "-c", _BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "done"
        used = process_cpu_s(child.pid)
        assert used is not None and used >= 0.3 - 0.02  # one clock tick of rounding
        sample = CpuSampler({"burner": child.pid, "gone": 2 ** 22 + 1}).sample()
        assert set(sample.switch_s) == {"burner"}  # a process that is not there is left out
    finally:
        child.communicate("")
    assert process_cpu_s(child.pid) is None


def test_machine_time_moves_forward_and_busy_never_exceeds_total() -> None:
    busy0, total0, cores = machine_cpu_s()
    _ = sum(range(200_000))
    busy1, total1, _ = machine_cpu_s()
    assert cores == os.cpu_count()  # one "cpuN" line per online core
    assert 0 <= busy0 <= total0 and busy1 >= busy0 and total1 >= total0


def test_a_switch_that_stopped_between_samples_is_left_out() -> None:
    use = cpu_use(CpuSample(0.0, {"a": 1.0, "b": 1.0}, 0, 10, 2), CpuSample(1.0, {"a": 1.5}, 1, 12, 2))
    assert dict(use.switches) == {"a": 0.5} and use.machine == 0.5


def test_the_verdict_names_a_switch_bound_run() -> None:
    rows = [cpu_row(cpu_use(CpuSample(0.0, {"s": 0.0}, 0, 0, 2), CpuSample(1.0, {"s": s}, 1, 2, 2))) for s in (0.3, 0.95)]
    summary = cpu_summary(rows)
    assert summary["switch_max"] == 0.95 and cpu_verdict(summary).startswith("SWITCH-BOUND")
    assert cpu_verdict(cpu_summary(rows[:1])).startswith("not switch-bound")
    assert cpu_summary([{"switch_cpu": None, "machine_cpu": ""}]) == {}


def test_engine_lines(tmp_path) -> None:
    (tmp_path / "s0.log").write_text(f"INFO x\nINFO {NATIVE_LINE}\n")
    (tmp_path / "s1.log").write_text(f"INFO {NATIVE_LINE}\nINFO running the program on the Python engine: value sets\n")
    (tmp_path / "s2.log").write_text("")
    assert fabric_engines("python", tmp_path, ["s0", "s1", "s2"]) == {"s0": "native", "s1": "python", "s2": "python"}
    assert fabric_engines("bmv2", None, ["s0"]) == {"s0": "bmv2"}
    assert engine_from_log("nothing") is None
