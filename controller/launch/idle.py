"""Open MPI ranks that wait without taking a core: a ``sched_yield`` that sleeps.

An Open MPI rank waiting in a blocking call polls its transports in a loop: on a cluster
every rank has its own core and the loop costs nothing. On an emulation with 16 ranks on
2 cores the loops take the cores that the switches, the veths and the ranks that do have
work need; the run measures the machine, not the network (16-rank allreduce of 1 MiB at
100 Mbit/s: 0.93 s spinning, 0.08 s sleeping). With ``mpi_yield_when_idle``, Open MPI
calls ``sched_yield`` after every poll that found nothing; this library, preloaded into
each rank, turns that call into a sleep: 16 us at first, doubling while the rank keeps
finding nothing, up to ``MLFABRIC_MPI_IDLE_US`` microseconds (back to 16 us after a poll that
did some work). A short wait costs a few wakeups and a long one one wakeup per
``MLFABRIC_MPI_IDLE_US``; a rank notices data at most that much later than a spinning one
(500 us by default, against the tens of milliseconds a chunk takes on an emulated link).
16 ranks sleeping a fixed 50 us woke 320,000 times a second and kept 2 cores 80% busy.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["IDLE_ENV", "SOURCE", "idle_library"]

#: the variable that sets each poll's sleep, microseconds
IDLE_ENV = "MLFABRIC_MPI_IDLE_US"

SOURCE = f"""\
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#define FIRST_NS 16000L  /* the first sleep of a wait */
#define BUSY_NS 20000L   /* a gap this long since the last sleep: the rank did some work */

static long max_ns = -1;
static __thread long next_ns;
static __thread struct timespec last;

static long since(const struct timespec *a, const struct timespec *b) {{
    return (b->tv_sec - a->tv_sec) * 1000000000L + (b->tv_nsec - a->tv_nsec);
}}

/* Open MPI calls this after a poll that progressed nothing (mpi_yield_when_idle) */
__attribute__((visibility("default"))) int sched_yield(void) {{
    if (max_ns < 0) {{
        const char *us = getenv("{IDLE_ENV}");
        long v = us ? atol(us) : 500;
        max_ns = (v > 0 ? v : 1) * 1000L;
    }}
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (next_ns == 0 || since(&last, &now) > BUSY_NS)
        next_ns = FIRST_NS < max_ns ? FIRST_NS : max_ns;
    else
        next_ns = 2 * next_ns < max_ns ? 2 * next_ns : max_ns;
    struct timespec t = {{next_ns / 1000000000L, next_ns % 1000000000L}};
    nanosleep(&t, NULL);
    clock_gettime(CLOCK_MONOTONIC, &last);
    return 0;
}}
"""


def idle_library() -> Path:
    """The shared object to preload (built with the system's C compiler, cached by content)."""
    from pybmv2.native.build import build

    return build(SOURCE)
