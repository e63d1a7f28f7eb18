"""A V1Switch whose packet path runs in the native engine, and the engine choice.

:class:`NativeSwitch` keeps everything a :class:`~pybmv2.switch.V1Switch` has (the
P4Runtime layer drives it unchanged) and runs :meth:`process` through a
:class:`~pybmv2.native.engine.NativeEngine` kept in step by an
:class:`~pybmv2.native.mirror.EngineMirror`, which applies every control-plane change as
it is made; :meth:`NativeSwitch.refresh` brings the engine's counts back before a Read.
``engine="auto"`` runs a program the native
engine cannot (or no C compiler) on the Python engine, logging why; ``"native"`` refuses
it; ``"python"`` never builds anything.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence

from pybmv2.native.build import compiler
from pybmv2.native.engine import NativeEngine
from pybmv2.native.errors import NativeBuildError, NativeUnsupported
from pybmv2.native.mirror import EngineMirror
from pybmv2.program import Program
from pybmv2.startup import StartupPhases
from pybmv2.switch import DigestSample, V1Switch

__all__ = ["ENGINES", "NativeSwitch", "engine_for"]

log = logging.getLogger(__name__)

ENGINES = ("auto", "native", "python")


def engine_for(program: Program, mode: str, startup: StartupPhases | None = None
               ) -> tuple[NativeEngine | None, str | None]:
    """The native engine for ``program`` under ``mode``, or None and why not.

    ``mode="native"`` raises :class:`NativeUnsupported` or :class:`NativeBuildError`
    instead of returning None. The C is generated once, and not at all when the cache
    has the program (:mod:`~pybmv2.native.cache`); the phases go to ``startup``.
    """
    if mode not in ENGINES:
        raise ValueError(f"unknown engine {mode!r}: choose one of {ENGINES}")
    if mode == "python":
        return None, "the Python engine was asked for"
    reason = None
    if compiler() is None:
        reason = "no C compiler (install gcc or set CC)"
    else:
        try:
            return NativeEngine(program, startup=startup), None
        except NativeUnsupported as exc:
            reason = str(exc)
        except NativeBuildError as exc:
            if mode == "native":
                raise
            return None, str(exc)
    if mode == "native":
        raise NativeUnsupported(f"the native engine cannot run this program: {reason}")
    return None, reason


class NativeSwitch(V1Switch):
    """A V1Switch that processes packets in the native engine where it can.

    Examples
    --------
    >>> from controller.p4build import pipeline_files
    >>> sw = NativeSwitch(Program.from_file(pipeline_files("rail_switch").json), engine="native")
    >>> sw.engine_name, sw.process(1, bytes(14))   # no route installed: dropped
    ('native', [])
    >>> sw.close()
    """

    def __init__(self, program: Program | None, *, cpu_port: int | None = None,
                 engine: str = "auto") -> None:
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}: choose one of {ENGINES}")
        self.engine_mode = engine
        self.native: NativeEngine | None = None
        self.mirror: EngineMirror | None = None
        #: why the loaded program runs on the Python engine (None when it runs natively)
        self.fallback_reason: str | None = None
        self._stale = False  # the Python engine ran packets: push() before the next batch
        #: called under the lock before a load replaces the engine, and after (process mode
        #: stops the engine's I/O thread and starts one on the new engine)
        self.before_engine_change: Callable[[], None] | None = None
        self.after_engine_change: Callable[[], None] | None = None
        super().__init__(program, cpu_port=cpu_port)

    @property
    def engine_name(self) -> str:
        return "native" if self.native is not None else "python"

    def load(self, program: Program) -> None:
        with self.lock:
            native, reason = engine_for(program, self.engine_mode, self.startup)
            super().load(program)
            if self.startup is not None:
                self.startup.lap("the Python engine's switch state")
            if self.before_engine_change is not None:
                self.before_engine_change()
            self.close()
            self.native, self.fallback_reason = native, reason
            if native is not None:
                self.mirror = EngineMirror(native, program, self.pre)
                self.mirror.attach()
                for table in program.tables.values():  # the engine runs the packets
                    table.defer_index()
                if self.startup is not None:
                    self.startup.lap("native: table push")
            if native is None and self.engine_mode == "auto":
                log.info("running the program on the Python engine: %s", reason)
            if self.after_engine_change is not None:
                self.after_engine_change()

    def close(self) -> None:
        """Free the native engine (the switch then runs on the Python engine)."""
        with self.lock:
            if self.mirror is not None:
                self.mirror.detach()
            if self.native is not None:
                self.native.close()
            self.native = self.mirror = None

    @contextlib.contextmanager
    def deferring_adds(self) -> Iterator[None]:
        """Entries inserted meanwhile reach the native engine with one call at the end
        (:meth:`EngineMirror.deferring_adds`)."""
        mirror = self.mirror
        if mirror is None:
            yield
            return
        with mirror.deferring_adds(self.lock):
            yield

    def sync(self) -> int:
        """Compare the Python state (entries, PRE, externs) with the engine's and apply the
        differences; how many engine calls that took (0 unless the Python engine ran)."""
        with self.lock:
            self._stale = False
            return self.mirror.push() if self.mirror is not None else 0

    def refresh(self) -> None:
        """Bring the engine's counters, registers and meter buckets into the Python objects."""
        with self.lock:
            if self.mirror is not None:
                self.mirror.pull()

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        return self.process_batch([(port, frame)])

    def process_batch(self, frames: Sequence[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        """Run frames through the switch in order; every (port, frame) they emit.

        With tracing on, or without a native engine, the Python engine runs them."""
        with self.lock:
            if self.native is None or self.mirror is None or self._trace is not None:
                out: list[tuple[int, bytes]] = []
                self._stale = self.native is not None
                for port, frame in frames:
                    out += super().process(port, frame)
                return out
            if self._stale:  # registers and meter buckets the Python engine changed
                self.sync()
            with self.native.locked():
                self.mirror.push_value_sets()
                out = self.native.process(frames, self.now_us())
            self.mirror.pull()
            digests = self.native.take_digests()
        for lid, values in digests:
            self.deliver_digest(lid, values)
        return out

    def deliver_digest(self, learn_id: int, values: tuple[int, ...]) -> None:
        """A digest the engine made, to :attr:`on_digest` as the Python engine gives it."""
        program, sink = self.program, self.on_digest
        ll = program.learn_lists.get(learn_id) if program is not None else None
        if ll is not None and sink is not None:
            sink(DigestSample(ll.id, ll.name, values))
