"""The C ABI of the engine's shared object: every exported function's ctypes signature
(csrc/rt_api.c and csrc/rt_io.c define them)."""

from __future__ import annotations

import ctypes
from ctypes import (
    POINTER,
    c_char_p,
    c_double,
    c_int,
    c_int32,
    c_int64,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any

__all__ = ["load_library"]

U64P, U32P, I64P, DP = POINTER(c_uint64), POINTER(c_uint32), POINTER(c_int64), POINTER(c_double)
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "nx_create": (c_void_p, []),
    "nx_destroy": (None, [c_void_p]),
    "nx_table_add": (c_int64, [c_void_p, c_int, c_char_p, c_char_p, c_int, c_int32, c_uint64, c_int32,
                               U64P, c_int, c_int, c_uint32]),
    "nx_table_add_many": (c_int64, [c_void_p, c_void_p, c_uint32, c_void_p]),
    "nx_table_modify": (c_int, [c_void_p, c_int, c_int64, c_int32, U64P, c_int, c_int, c_uint32]),
    "nx_table_delete": (c_int, [c_void_p, c_int, c_int64]),
    "nx_table_set_default": (c_int, [c_void_p, c_int, c_int32, U64P, c_int]),
    "nx_table_size": (c_int64, [c_void_p, c_int]),
    "nx_table_slots": (c_int64, [c_void_p, c_int]),
    "nx_entry_counters": (c_int, [c_void_p, c_int, c_int64, U64P, c_int]),
    "nx_entry_set_counters": (c_int, [c_void_p, c_int, c_int64, c_uint64, c_uint64]),
    "nx_entry_meter": (c_int, [c_void_p, c_int, c_int64, c_int, DP]),
    "nx_pull_begin": (None, [c_void_p]),
    "nx_table_take": (c_int64, [c_void_p, c_int, I64P, U64P, DP, U64P, c_int64]),
    "nx_member_set": (c_int, [c_void_p, c_int, c_uint32, c_int32, U64P, c_int]),
    "nx_member_delete": (c_int, [c_void_p, c_int, c_uint32]),
    "nx_group_set": (c_int, [c_void_p, c_int, c_uint32, U32P, c_uint32]),
    "nx_group_delete": (c_int, [c_void_p, c_int, c_uint32]),
    "nx_counter_read": (c_int, [c_void_p, c_int, c_uint64, U64P, c_int]),
    "nx_counter_write": (c_int, [c_void_p, c_int, c_uint64, c_uint64, c_uint64]),
    "nx_counter_take": (c_int64, [c_void_p, c_int, U32P, U64P, c_int64]),
    "nx_register_read": (c_int, [c_void_p, c_int, c_uint64, U64P]),
    "nx_register_write": (c_int, [c_void_p, c_int, c_uint64, c_uint64, c_uint64]),
    "nx_register_take": (c_int64, [c_void_p, c_int, U32P, U64P, c_int64]),
    "nx_meter_set": (c_int, [c_void_p, c_int, c_uint64, c_int, DP]),
    "nx_meter_take": (c_int64, [c_void_p, c_int, U32P, DP, c_int64]),
    "nx_vset_set": (c_int, [c_void_p, c_int, U64P, c_uint32]),
    "nx_mgrp_set": (c_int, [c_void_p, c_uint32, U32P, U32P, c_uint32]),
    "nx_mgrp_delete": (c_int, [c_void_p, c_uint32]),
    "nx_session_set": (c_int, [c_void_p, c_uint32, U32P, U32P, c_uint32, c_int64]),
    "nx_session_delete": (c_int, [c_void_p, c_uint32]),
    "nx_process": (c_int64, [c_void_p, c_char_p, c_void_p, c_void_p, c_uint32, c_uint64]),
    "nx_outputs": (c_uint32, [c_void_p, POINTER(c_void_p), POINTER(c_void_p), POINTER(c_void_p),
                              POINTER(c_void_p)]),
    "nx_digests": (c_uint32, [c_void_p, POINTER(c_void_p), U64P]),
    "nx_algo": (c_uint64, [c_char_p, c_char_p, c_uint64]),
    "nx_lock": (None, [c_void_p]),
    "nx_io_open": (c_int, [c_void_p, c_uint64, c_int64, c_uint32, c_double]),
    "nx_io_port": (c_int, [c_void_p, c_uint32, c_int, c_int]),
    "nx_io_offloads": (c_int, [c_void_p, U64P]),
    "nx_io_queue": (c_int, [c_void_p, c_int64, c_uint32, c_double]),
    "nx_io_start": (c_int, [c_void_p]),
    "nx_io_stop": (None, [c_void_p]),
    "nx_io_close": (None, [c_void_p]),
    "nx_io_up_fd": (c_int, [c_void_p]),
    "nx_io_inject": (c_int, [c_void_p, c_uint64, c_char_p, c_uint32]),
    "nx_io_take": (c_uint64, [c_void_p, POINTER(c_void_p)]),
    "nx_io_stats": (c_int, [c_void_p, U64P, U32P, c_uint32]),
    "nx_io_calendar": (c_int, [c_void_p, c_int64]),
    "nx_io_busy_poll": (c_int, [c_void_p, c_uint32]),
    "nx_io_delay": (c_int, [c_void_p, c_uint32, c_uint64, c_uint64]),
    "nx_io_holds": (c_int, [c_void_p, U64P]),
    "nx_unlock": (None, [c_void_p]),
}


def load_library(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    for name, (res, args) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib
