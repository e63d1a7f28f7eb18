"""The CLI's stdin without a terminal: lines as written, end of input at EOF, and end of
input as soon as the wake pipe (signal.set_wakeup_fd's) is written, from any thread."""

from __future__ import annotations

import contextlib
import os
import threading
import time

import pytest

from controller.emulation import load_emulation_module

StoppableStdin = load_emulation_module("stoppable_stdin").StoppableStdin


@pytest.fixture()
def pipes():
    r, w = os.pipe()
    wake_r, wake_w = os.pipe()
    stream = os.fdopen(r, "r")
    yield stream, w, wake_r, wake_w
    stream.close()
    for fd in (w, wake_r, wake_w):
        with contextlib.suppress(OSError):
            os.close(fd)


def test_lines_split_across_writes_come_back_whole_and_in_order(pipes) -> None:
    stream, w, wake_r, _ = pipes
    stdin = StoppableStdin(stream, wake_r)
    os.write(w, b"nodes\npin")
    assert stdin.readline() == "nodes\n"
    os.write(w, b"gall\nexit\n")
    assert stdin.readline() == "pingall\n"
    assert stdin.read(1) == "e"
    assert stdin.readline() == "xit\n"
    os.close(w)
    assert stdin.readline() == "", "end of input"
    assert stdin.fileno() == stream.fileno()
    assert not stdin.isatty()


def test_a_wake_from_another_thread_ends_a_blocked_readline(pipes) -> None:
    stream, _, wake_r, wake_w = pipes
    stdin = StoppableStdin(stream, wake_r)
    threading.Timer(0.05, lambda: os.write(wake_w, b"\x02")).start()  # what SIGINT's C handler writes
    started = time.monotonic()
    assert stdin.readline() == ""
    assert stdin.stopped
    assert time.monotonic() - started < 5
    assert stdin.readline() == "" and stdin.read(1) == "", "stays ended"


def test_a_wake_wins_over_a_partial_line(pipes) -> None:
    stream, w, wake_r, wake_w = pipes
    stdin = StoppableStdin(stream, wake_r)
    os.write(w, b"pinga")
    os.write(wake_w, b"\x0f")
    assert stdin.readline() == ""
