"""Frames the packet tests send leave from one CPU (packettest.veth.on_one_cpu), so that a
veth's per-CPU backlog cannot deliver them out of order on a loaded machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from packettest.veth import on_one_cpu


def current_cpu() -> int:
    """The CPU this thread last ran on (field 39 of /proc/thread-self/stat)."""
    stat = Path("/proc/thread-self/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[36])


def test_the_thread_runs_on_the_cpu_inside_and_gets_its_cpus_back() -> None:
    before = os.sched_getaffinity(0)
    cpu = max(before)
    with on_one_cpu(cpu):
        assert os.sched_getaffinity(0) == {cpu}
        assert current_cpu() == cpu  # moved there before the block runs
    assert os.sched_getaffinity(0) == before


def test_the_cpus_come_back_when_the_send_fails() -> None:
    before = os.sched_getaffinity(0)
    with pytest.raises(OSError), on_one_cpu(min(before)):
        raise OSError("send failed")
    assert os.sched_getaffinity(0) == before


def test_a_thread_already_on_that_cpu_only_is_left_alone() -> None:
    before = os.sched_getaffinity(0)
    cpu = min(before)
    os.sched_setaffinity(0, {cpu})
    try:
        with on_one_cpu(cpu):
            assert os.sched_getaffinity(0) == {cpu}
        assert os.sched_getaffinity(0) == {cpu}
    finally:
        os.sched_setaffinity(0, before)
