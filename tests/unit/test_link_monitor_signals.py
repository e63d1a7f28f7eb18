"""A signal that lands while the link monitor's thread is starting stops the run as an
interrupt (exit 130), not as a RuntimeError from joining a thread that never ran."""

from __future__ import annotations

import threading

import pytest

from controller.emulation import load_emulation_module


def test_an_interrupt_inside_the_monitor_s_start_stays_an_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    link_monitor = load_emulation_module("link_monitor")

    def interrupted(self: threading.Thread) -> None:
        raise KeyboardInterrupt("SIGTERM")  # as interrupt_on_signals raises it, before the thread runs

    monkeypatch.setattr(threading.Thread, "start", interrupted)
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"), link_monitor.LinkMonitor([]).watch():
        pytest.fail("the body must not run")
