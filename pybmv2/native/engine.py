"""The native engine's Python face: ctypes over the shared object built for one program.

:class:`NativeEngine` exposes the operations the P4Runtime layer performs on the Python
engine (table entries and defaults, profile members and groups, counters, registers,
meters, multicast groups and clone sessions) and the batch packet API. ctypes releases the
GIL for the duration of every call, so :meth:`NativeEngine.process` runs outside it. State
changes and ``process`` must not run concurrently: callers hold one lock (as V1Switch's).
Pulls of what the data plane counted (:meth:`NativeEngine.pull_begin` and the ``*_take``
calls) need no lock against ``process`` or the I/O thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
from array import array
from collections.abc import Iterable, Iterator, Sequence
from ctypes import c_double, c_int64, c_uint32, c_uint64, c_void_p
from pathlib import Path
from typing import Any

from pybmv2.errors import EntryExistsError, EntryNotFoundError, InvalidEntryError, TargetError
from pybmv2.externs import MeterRates
from pybmv2.native import cache
from pybmv2.native.build import build, compiler
from pybmv2.native.cabi import load_library
from pybmv2.native.errors import NativeBuildError
from pybmv2.native.manifest import NativeManifest, TableMeta
from pybmv2.native.records import decode_records
from pybmv2.pre import Replica
from pybmv2.program import Program
from pybmv2.startup import StartupPhases
from pybmv2.tables import ActionCall, IndirectIndex

__all__ = ["Frames", "NativeEngine", "engine_library"]

Frames = list[tuple[int, bytes]]
#: an entry for :meth:`NativeEngine.table_add_many`: (table, key, priority, action, seq,
#: indirect), as :meth:`NativeEngine.table_add` takes them
NewEntry = tuple[str, Sequence[Any], int, ActionCall, int, "IndirectIndex | None"]
M64 = (1 << 64) - 1
#: how many actions' argument words an engine keeps (:meth:`NativeEngine._args`)
ARGS_MEMO_SIZE = 4096
log = logging.getLogger(__name__)


def _check(rc: int, what: str) -> int:
    if rc >= 0:
        return rc
    if rc == -1:
        raise EntryExistsError(f"{what}: entry already exists")
    if rc == -2:
        raise EntryNotFoundError(f"{what}: no such entry")
    if rc == -4:
        raise MemoryError(f"{what}: out of memory in the native engine")
    raise InvalidEntryError(f"{what}: invalid argument")


def _words(values: Sequence[int]) -> Any:
    return (c_uint64 * max(len(values), 1))(*values)


def _split(value: int, nwords: int) -> list[int]:
    return [value & M64] if nwords == 1 else [value & M64, (value >> 64) & M64]


def _meter_cfg(rates: MeterRates | None, tokens: Sequence[float] | None) -> Any:
    if rates is None:
        return (c_double * 7)()
    p, c, t = tokens if tokens is not None else (float(rates.pburst), float(rates.cburst), 0.0)
    return (c_double * 7)(rates.cir, rates.cburst, rates.pir, rates.pburst, p, c, t)


def engine_library(program: Program, startup: StartupPhases | None = None
                   ) -> tuple[Path, NativeManifest, bool]:
    """The shared object and manifest of ``program``'s engine, and whether they came from
    the cache's index (:mod:`~pybmv2.native.cache`) without generating any C.

    On a miss the C is generated and built (or found by its content,
    :func:`~pybmv2.native.build.build`) and the index entry written. Raises
    NativeUnsupported for a program the engine cannot run, NativeBuildError without a
    compiler or when it fails. The phases go to ``startup``.
    """
    cc = compiler()
    if cc is None:
        raise NativeBuildError("no C compiler: install gcc (Debian: apt-get install gcc "
                               "libc6-dev) or set CC")
    key = cache.index_key(program.source_sha256, cc) if program.source_sha256 else None
    hit = cache.lookup(key) if key is not None else None
    if startup is not None:
        startup.lap("native: cache look-up")
    if hit is not None:
        return hit[0], hit[1], True
    from pybmv2.native.cprogram import generate  # the generator, only when it is needed

    source, manifest = generate(program)
    if startup is not None:
        startup.lap("native: C generation")
    path = build(source)
    if startup is not None:
        startup.lap("native: C compiler")
    if key is not None:
        cache.store(key, path, manifest)
    return path, manifest, False


class NativeEngine:
    """One program compiled to C and one engine running it.

    The engine starts empty: :class:`~pybmv2.native.mirror.EngineMirror` applies a
    Program's defaults and const entries (and whatever P4Runtime wrote since).
    ``startup`` gets the phases of building it (:func:`engine_library`, then ``dlopen``).

    Examples
    --------
    >>> from controller.p4build import pipeline_files
    >>> from pybmv2.native.mirror import EngineMirror
    >>> from pybmv2.pre import ReplicationEngine
    >>> program = Program.from_file(pipeline_files("rail_switch").json)
    >>> engine = NativeEngine(program)
    >>> EngineMirror(engine, program, ReplicationEngine()).push()   # engine calls made
    46
    >>> engine.process([(1, bytes(14))])   # not IPv4: dropped
    []
    >>> engine.close()
    """

    def __init__(self, program: Program, *, startup: StartupPhases | None = None) -> None:
        path, manifest, cached = engine_library(program, startup)
        self.program = program
        self.manifest: NativeManifest = manifest
        self.path = path
        #: the engine came from the cache's index, with no C generated
        self.from_index = cached
        self._lib = load_library(str(self.path))
        self._ctx = self._lib.nx_create()
        if not self._ctx:
            raise MemoryError("the native engine could not allocate its context")
        self._tables = {m.name: m for m in manifest.tables}
        self._args_memo: dict[ActionCall, tuple[Any, list[int]]] = {}
        #: id(ActionCall) -> (that object, its words): cheaper than hashing the call
        self._args_by_id: dict[int, tuple[ActionCall, list[int]]] = {}
        self._digests: list[tuple[int, tuple[int, ...]]] = []
        # out-parameters of nx_outputs and nx_digests
        self._buf, self._ports, self._offs, self._lens = c_void_p(), c_void_p(), c_void_p(), \
            c_void_p()
        self._dig, self._nwords = c_void_p(), c_uint64()
        if startup is not None:
            startup.lap("native: dlopen")

    def close(self) -> None:
        if self._ctx:
            self._lib.nx_destroy(self._ctx)
            self._ctx = None

    def __enter__(self) -> NativeEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter shutdown
            self.close()

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the engine's lock (recursive): no packet runs meanwhile in process mode."""
        lib, ctx = self._lib, self._ctx
        lib.nx_lock(ctx)
        try:
            yield
        finally:
            lib.nx_unlock(ctx)

    # -- tables ---------------------------------------------------------------------------

    def table(self, name: str) -> TableMeta:
        try:
            return self._tables[name]
        except KeyError:
            raise TargetError(f"no table named {name!r} in the native engine") from None

    def _args(self, call: ActionCall) -> tuple[Any, int]:
        """The engine's argument words of ``call`` as a ctypes array, and how many."""
        array_, words = self._arg_words(call)
        return array_, len(words)

    def _arg_words(self, call: ActionCall) -> tuple[Any, list[int]]:
        """The engine's argument words of ``call`` (a ctypes array and a list), memoized: a
        batch of writes repeats a few actions, and building them costs more than the
        engine's whole insert. The engine copies them: one array serves every entry."""
        found = self._args_memo.get(call)
        if found is not None:
            return found
        layout = self.manifest.action_args.get(call.action_id, [])
        words = [0] * self.manifest.max_argw
        for (word, width), value in zip(layout, call.args, strict=False):
            for i, w in enumerate(_split(value, 1 if width <= 64 else 2)):
                words[word + i] = w
        found = (_words(words), words)
        if len(self._args_memo) < ARGS_MEMO_SIZE:
            self._args_memo[call] = found
        return found

    @staticmethod
    def _key_words(meta: TableMeta, key: Sequence[Any]) -> tuple[list[int], list[int], int]:
        """A key as the engine's two word arrays (value, and mask or high; each field at its
        first word, low word first) and its prefix length."""
        fields = meta.fields
        if len(fields) == 1 and fields[0][3] == 1 and len(key) == 1:  # one field, one word
            kind, width = fields[0][0], fields[0][1]
            part = key[0]
            if kind == "exact" or kind == "valid":
                if not part >> width:
                    return [part], [0], 0
            elif kind == "lpm":
                va, plen = part
                if 0 <= plen <= width and not va >> width:
                    return [va], [((1 << width) - 1) ^ ((1 << (width - plen)) - 1)], plen
        n = meta.nwords or 1
        a, b = [0] * n, [0] * n
        plen = 0
        for (kind, width, word, nw), part in zip(fields, key, strict=True):
            if kind == "exact" or kind == "valid":
                va, vb = part, 0
            elif kind == "lpm":
                va, plen = part
                if not 0 <= plen <= width:
                    raise InvalidEntryError(f"table {meta.name!r}: prefix length {plen} of a "
                                            f"{width}-bit field")
                vb = ((1 << width) - 1) ^ ((1 << (width - plen)) - 1)
            else:  # ternary, optional: (value, mask); range: (low, high)
                va, vb = part
            if va >> width or vb >> width:  # negative, or wider than the field
                bad = va if va >> width else vb
                raise InvalidEntryError(f"table {meta.name!r}: value {bad:#x} does not fit "
                                        f"a {width}-bit key field")
            if nw == 1:
                a[word], b[word] = va, vb
            else:
                a[word:word + nw] = _split(va, nw)
                b[word:word + nw] = _split(vb, nw)
        return a, b, plen

    def _key(self, meta: TableMeta, key: Sequence[Any]) -> tuple[bytes, bytes, int]:
        """:meth:`_key_words` as bytes (ctypes passes them as the word arrays)."""
        a, b, plen = self._key_words(meta, key)
        return array("Q", a).tobytes(), array("Q", b).tobytes(), plen

    @staticmethod
    def _indirect(index: IndirectIndex | None) -> tuple[int, int]:
        if index is None:
            return 0, 0
        return (2 if index.is_group else 1), index.handle

    def table_add(self, table: str, key: Sequence[Any], priority: int, action: ActionCall, *,
                  seq: int = 0, indirect: IndirectIndex | None = None) -> int:
        """Add an entry (keys as :mod:`pybmv2.tables` writes them); its engine id.

        Among entries of equal priority, the lower ``seq`` wins (the Python engine's
        insertion order)."""
        meta = self.table(table)
        a, b, plen = self._key(meta, key)
        args, nargs = self._args(action)
        kind, handle = self._indirect(indirect)
        rc = self._lib.nx_table_add(self._ctx, meta.tid, a, b, plen, priority, seq,
                                    action.action_id, args, nargs, kind, handle)
        return _check(rc, f"table {table!r}")

    def table_add_many(self, entries: Sequence[NewEntry]
                       ) -> tuple[list[int], TargetError | MemoryError | None]:
        """:meth:`table_add` for many entries with one engine call (one take of its lock).

        Returns the engine ids of the entries added, in order, and the error of the first
        that could not be (None if all were): the entries after it are not tried."""
        words: list[int] = []
        extend = words.extend
        packed = 0
        error: TargetError | MemoryError | None = None
        by_id = self._args_by_id
        for table, key, priority, action, seq, indirect in entries:
            try:
                meta = self.table(table)
                a, b, plen = self._key_words(meta, key)
            except TargetError as exc:
                error = exc
                break
            found = by_id.get(id(action))  # a batch's entries share a few ActionCall objects
            if found is None or found[0] is not action:
                found = by_id[id(action)] = (action, self._arg_words(action)[1])
                if len(by_id) > ARGS_MEMO_SIZE:
                    by_id.clear()
            argw = found[1]
            if indirect is None:
                extend((meta.tid, plen, priority & M64, seq, action.action_id & M64, len(argw), 0, 0,
                        len(a)))
            else:
                extend((meta.tid, plen, priority & M64, seq, action.action_id & M64, len(argw),
                        2 if indirect.is_group else 1, indirect.handle, len(a)))
            extend(a)
            extend(b)
            extend(argw)
            packed += 1
        if not packed:
            return [], error
        buf = array("Q", words)
        eids = (c_int64 * packed)()
        added = self._lib.nx_table_add_many(self._ctx, buf.buffer_info()[0], packed, eids)
        if added < packed:
            try:
                _check(eids[added], f"table {entries[added][0]!r}")
            except (TargetError, MemoryError) as exc:
                error = exc
        return eids[:added], error

    def table_modify(self, table: str, eid: int, action: ActionCall,
                     indirect: IndirectIndex | None = None) -> None:
        args, nargs = self._args(action)
        kind, handle = self._indirect(indirect)
        _check(self._lib.nx_table_modify(self._ctx, self.table(table).tid, eid, action.action_id,
                                         args, nargs, kind, handle), f"table {table!r}")

    def table_delete(self, table: str, eid: int) -> None:
        _check(self._lib.nx_table_delete(self._ctx, self.table(table).tid, eid),
               f"table {table!r}")

    def table_set_default(self, table: str, action: ActionCall) -> None:
        args, nargs = self._args(action)
        _check(self._lib.nx_table_set_default(self._ctx, self.table(table).tid, action.action_id,
                                              args, nargs), f"table {table!r}")

    def table_size(self, table: str) -> int:
        return self._lib.nx_table_size(self._ctx, self.table(table).tid)

    def entry_counters(self, table: str, eid: int, *, reset: bool = False) -> tuple[int, int]:
        """An entry's (packets, bytes) not taken yet (``reset``: take them)."""
        out = (c_uint64 * 2)()
        _check(self._lib.nx_entry_counters(self._ctx, self.table(table).tid, eid, out, reset),
               f"table {table!r}")
        return out[0], out[1]

    def entry_set_counters(self, table: str, eid: int, packets: int, nbytes: int) -> None:
        """Make an entry's counts not taken yet read (packets, bytes)."""
        _check(self._lib.nx_entry_set_counters(self._ctx, self.table(table).tid, eid, packets,
                                               nbytes), f"table {table!r}")

    def entry_meter(self, table: str, eid: int, rates: MeterRates | None,
                    tokens: Sequence[float] | None = None) -> None:
        """Configure an entry's direct meter (None: unconfigured, always green)."""
        _check(self._lib.nx_entry_meter(self._ctx, self.table(table).tid, eid,
                                        rates is not None, _meter_cfg(rates, tokens)),
               f"table {table!r}")

    def pull_begin(self) -> None:
        """Start a pull of what the data plane changed: the ``*_take`` calls that follow
        return what it changed up to now, read without the engine's lock (packets go on).

        Pulls must not overlap each other or the calls that change state; the packet thread
        is never waited for longer than the round it is running.
        """
        self._lib.nx_pull_begin(self._ctx)

    def table_take(self, table: str) -> list[tuple[int, int, int, tuple[float, float, float], int]]:
        """The entries packets hit before the last :meth:`pull_begin` and not taken yet:
        (id, packets, bytes since they were last taken, meter state, the ingress timestamp
        of the last hit: tables with support_timeout, else 0)."""
        meta = self.table(table)
        cap = max(self._lib.nx_table_size(self._ctx, meta.tid), 1)
        eids, counts, meters = (c_int64 * cap)(), (c_uint64 * (2 * cap))(), (c_double * (3 * cap))()
        hits = (c_uint64 * cap)()
        out: list[tuple[int, int, int, tuple[float, float, float], int]] = []
        while True:  # more than ``cap`` only after a pull that did not take everything
            n = self._lib.nx_table_take(self._ctx, meta.tid, eids, counts, meters, hits, cap)
            out += [(eids[i], counts[2 * i], counts[2 * i + 1],
                     (meters[3 * i], meters[3 * i + 1], meters[3 * i + 2]), hits[i]) for i in range(n)]
            if n < cap:
                return out

    # -- action profiles --------------------------------------------------------------------

    def profile(self, pipeline: str, name: str) -> int:
        try:
            return self.manifest.profiles[(pipeline, name)]
        except KeyError:
            raise TargetError(f"no action profile {name!r} in {pipeline}") from None

    def member_set(self, profile: int, handle: int, action: ActionCall) -> None:
        args, nargs = self._args(action)
        _check(self._lib.nx_member_set(self._ctx, profile, handle, action.action_id, args, nargs),
               "action profile member")

    def member_delete(self, profile: int, handle: int) -> None:
        _check(self._lib.nx_member_delete(self._ctx, profile, handle), "action profile member")

    def group_set(self, profile: int, handle: int, members: Sequence[int]) -> None:
        arr = (c_uint32 * max(len(members), 1))(*sorted(members))
        _check(self._lib.nx_group_set(self._ctx, profile, handle, arr, len(members)),
               "action profile group")

    def group_delete(self, profile: int, handle: int) -> None:
        _check(self._lib.nx_group_delete(self._ctx, profile, handle), "action profile group")

    # -- counters, registers, meters ----------------------------------------------------------

    def counter_read(self, name: str, index: int, *, reset: bool = False) -> tuple[int, int]:
        out = (c_uint64 * 2)()
        _check(self._lib.nx_counter_read(self._ctx, self.manifest.counters[name], index, out,
                                         reset), f"counter {name!r}[{index}]")
        return out[0], out[1]

    def counter_write(self, name: str, index: int, packets: int, nbytes: int) -> None:
        _check(self._lib.nx_counter_write(self._ctx, self.manifest.counters[name], index,
                                          packets, nbytes), f"counter {name!r}[{index}]")

    def counter_take(self, name: str, size: int) -> list[tuple[int, int, int]]:
        """The cells counted before the last :meth:`pull_begin` and not taken yet: (index,
        packets, bytes since they were last taken)."""
        cap = max(size, 1)
        idx, counts = (c_uint32 * cap)(), (c_uint64 * (2 * cap))()
        out: list[tuple[int, int, int]] = []
        while True:
            n = self._lib.nx_counter_take(self._ctx, self.manifest.counters[name], idx, counts, cap)
            out += [(idx[i], counts[2 * i], counts[2 * i + 1]) for i in range(n)]
            if n < cap:
                return out

    def register_read(self, name: str, index: int) -> int:
        out = (c_uint64 * 2)()
        _check(self._lib.nx_register_read(self._ctx, self.manifest.registers[name][0], index,
                                          out), f"register {name!r}[{index}]")
        return out[0] | (out[1] << 64)

    def register_write(self, name: str, index: int, value: int) -> None:
        _check(self._lib.nx_register_write(self._ctx, self.manifest.registers[name][0], index,
                                           value & M64, (value >> 64) & M64),
               f"register {name!r}[{index}]")

    def register_take(self, name: str, size: int) -> list[tuple[int, int]]:
        """The cells the data plane wrote before the last :meth:`pull_begin` and not taken
        yet: (index, value)."""
        cap = max(size, 1)
        idx, vals = (c_uint32 * cap)(), (c_uint64 * (2 * cap))()
        out: list[tuple[int, int]] = []
        while True:
            n = self._lib.nx_register_take(self._ctx, self.manifest.registers[name][0], idx, vals,
                                           cap)
            out += [(idx[i], vals[2 * i] | (vals[2 * i + 1] << 64)) for i in range(n)]
            if n < cap:
                return out

    def meter_set(self, name: str, index: int, rates: MeterRates | None,
                  tokens: Sequence[float] | None = None) -> None:
        _check(self._lib.nx_meter_set(self._ctx, self.manifest.meters[name], index,
                                      rates is not None, _meter_cfg(rates, tokens)),
               f"meter {name!r}[{index}]")

    def meter_take(self, name: str, size: int) -> list[tuple[int, tuple[float, float, float]]]:
        """The meters executed before the last :meth:`pull_begin` and not taken yet:
        (index, (peak, committed, last))."""
        cap = max(size, 1)
        idx, st = (c_uint32 * cap)(), (c_double * (3 * cap))()
        out: list[tuple[int, tuple[float, float, float]]] = []
        while True:
            n = self._lib.nx_meter_take(self._ctx, self.manifest.meters[name], idx, st, cap)
            out += [(idx[i], (st[3 * i], st[3 * i + 1], st[3 * i + 2])) for i in range(n)]
            if n < cap:
                return out

    # -- the packet replication engine -----------------------------------------------------------

    @staticmethod
    def _replicas(replicas: Sequence[Replica]) -> tuple[Any, Any, int]:
        n = len(replicas)
        ports = (c_uint32 * max(n, 1))(*(r.egress_port for r in replicas))
        rids = (c_uint32 * max(n, 1))(*(r.rid for r in replicas))
        return ports, rids, n

    def mgrp_set(self, mgid: int, replicas: Sequence[Replica]) -> None:
        _check(self._lib.nx_mgrp_set(self._ctx, mgid, *self._replicas(replicas)),
               f"multicast group {mgid}")

    def mgrp_delete(self, mgid: int) -> None:
        _check(self._lib.nx_mgrp_delete(self._ctx, mgid), f"multicast group {mgid}")

    def session_set(self, sid: int, replicas: Sequence[Replica], truncate: int = 0) -> None:
        _check(self._lib.nx_session_set(self._ctx, sid, *self._replicas(replicas), truncate),
               f"clone session {sid}")

    def session_delete(self, sid: int) -> None:
        _check(self._lib.nx_session_delete(self._ctx, sid), f"clone session {sid}")

    # -- parser value sets ------------------------------------------------------------------

    def value_set_set(self, name: str, members: Iterable[int]) -> None:
        """A parser value set's members (a key outside 0..2**128-1 matches nothing)."""
        vid = self.manifest.value_sets.get(name)
        if vid is None:
            raise TargetError(f"no parser value set named {name!r} in the native engine")
        keep = sorted(m for m in members if 0 <= m < 1 << 128)
        words = _words([w for m in keep for w in (m & M64, m >> 64)])
        _check(self._lib.nx_vset_set(self._ctx, vid, words, len(keep)), f"value set {name}")

    # -- packets ------------------------------------------------------------------------------

    def process(self, frames: Sequence[tuple[int, bytes]], now_us: int = 0) -> Frames:
        """Run a batch through the switch: every (port, frame) it emits, in order.

        ``now_us`` is the global timestamp every packet of the batch sees. Digests the batch
        produced are kept for :meth:`take_digests`.
        """
        n = len(frames)
        if n == 0:
            return []
        data = b"".join([f for _, f in frames])
        lens = array("I", [len(f) for _, f in frames])
        ports = array("I", [p for p, _ in frames])
        lib, ctx = self._lib, self._ctx
        nout = lib.nx_process(ctx, data, lens.buffer_info()[0], ports.buffer_info()[0], n, now_us)
        if lib.nx_digests(ctx, ctypes.byref(self._dig), ctypes.byref(self._nwords)):
            self._collect_digests()
        if nout == 0:
            return []
        lib.nx_outputs(ctx, ctypes.byref(self._buf), ctypes.byref(self._ports),
                       ctypes.byref(self._offs), ctypes.byref(self._lens))
        offs = memoryview(ctypes.string_at(self._offs, 4 * nout)).cast("I").tolist()
        lns = memoryview(ctypes.string_at(self._lens, 4 * nout)).cast("I").tolist()
        oports = memoryview(ctypes.string_at(self._ports, 8 * nout)).cast("Q").tolist()
        blob = ctypes.string_at(self._buf, offs[-1] + lns[-1])
        return [(p, blob[o:o + ln]) for p, o, ln in zip(oports, offs, lns, strict=True)]

    def _collect_digests(self) -> None:
        self._digests += self.decode_digests(ctypes.string_at(self._dig, 8 * self._nwords.value))

    def decode_digests(self, raw: bytes) -> list[tuple[int, tuple[int, ...]]]:
        """The (learn list id, values) of the engine's digest records in ``raw``; the
        packets it dropped on a fault are logged as the Python engine logs them."""
        digests, faults = decode_records(raw, self.manifest.learn_signed, self.manifest.stacks)
        for fault in faults:
            log.error("%s", fault.message())
        return digests

    def take_digests(self) -> list[tuple[int, tuple[int, ...]]]:
        """The (learn list id, field values) of every digest since the last call."""
        out, self._digests = self._digests, []
        return out

