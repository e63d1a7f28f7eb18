"""The Python target's calendar-queue extension: the release field and the holding queue."""

from __future__ import annotations

import threading
import time

from controller.p4build import pipeline_files
from pybmv2.calendar import CalendarQueue, release_slot
from pybmv2.program import Program


def test_release_field_is_found_by_suffix_and_absent_elsewhere() -> None:
    tor = Program.from_file(pipeline_files("tor_switch").json)
    slot = release_slot(tor, "release_us")
    assert slot is not None and release_slot(tor, "scalars.metadata_t.release_us") == slot
    assert release_slot(Program.from_file(pipeline_files("circuit_switch").json), "release_us") is None
    assert release_slot(None, "release_us") is None


def test_jobs_leave_at_their_release_time_in_order() -> None:
    now = {"t": 0}
    out: list[tuple[str, int]] = []
    done = threading.Event()

    def release(job) -> None:
        out.append((job, now["t"]))
        if len(out) == 3:
            done.set()

    cal = CalendarQueue(release, lambda: now["t"])  # type: ignore[arg-type]
    cal.start()
    try:
        cal.hold("late", 300)  # type: ignore[arg-type]
        cal.hold("early", 100)  # type: ignore[arg-type]
        cal.hold("middle", 200)  # type: ignore[arg-type]
        for t in (50, 100, 150, 200, 250, 300):  # the switch's clock moves on; nothing leaves early
            now["t"] = t
            time.sleep(0.02)
        assert done.wait(2)
    finally:
        cal.stop()
    assert [name for name, _ in out] == ["early", "middle", "late"]
    assert all(at >= {"early": 100, "middle": 200, "late": 300}[name] for name, at in out)
