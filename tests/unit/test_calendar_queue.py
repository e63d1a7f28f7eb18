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


def test_the_port_delay_extension_holds_a_ports_frames_and_only_its() -> None:
    """``--port-delay PORT:US``: a delayed port's frames leave no earlier than the delay after
    their transmission, in order; other ports' frames leave at once."""
    from controller.readiness import free_tcp_port
    from pybmv2.cli import _options, build_parser
    from pybmv2.daemon import SwitchDaemon

    args = build_parser().parse_args(["--no-p4", "--grpc-server-addr", f"127.0.0.1:{free_tcp_port()}",
                                      "--port-delay", "2:20000"])
    daemon = SwitchDaemon(_options(args))
    sent: list[tuple[int, bytes, int]] = []
    daemon._send = lambda port, frame: sent.append((port, frame, daemon.switch.now_us()))  # type: ignore[method-assign]
    clock = {"now": 1_000_000}
    daemon.switch.clock = lambda: clock["now"]
    try:
        assert daemon.delay_line is not None
        daemon.delay_line.start()
        daemon.transmit(1, b"now")
        daemon.transmit(2, b"a")
        daemon.transmit(2, b"b")
        assert [f for _, f, _ in sent] == [b"now"]
        clock["now"] += 19_999
        daemon.delay_line.hold((9, b"poke"), 0)  # wake the line: nothing of port 2 is due yet
        time.sleep(0.05)
        assert [f for _, f, _ in sent] == [b"now", b"poke"]
        clock["now"] += 1
        daemon.delay_line.hold((9, b"poke"), 0)
        deadline = time.monotonic() + 5
        while len(sent) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [f for _, f, _ in sent] == [b"now", b"poke", b"poke", b"a", b"b"]  # release order
        assert all(t >= 1_020_000 for p, f, t in sent if p == 2)
    finally:
        daemon.close()
