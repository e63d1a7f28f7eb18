"""Atomic checkpoints: the iteration, the parameters, the optimizer state and JSON metadata.

A checkpoint is one ``.npz`` file. :func:`save_checkpoint` writes it to a temporary file in
the same directory (``<name>.tmp-<pid>``), flushes and fsyncs it, renames it over the target
with :func:`os.replace` and fsyncs the directory: whatever happens mid-write, the target is
either the previous complete checkpoint or the new one, never a torn file.

Inside the archive: ``iteration`` (0-d int64), ``params`` (float32), ``meta`` (a JSON
string, a 0-d unicode array: no pickles) and one ``opt_<name>`` entry per optimizer state
array.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     p = save_checkpoint(Path(d) / "ck.npz", iteration=3, params=np.arange(4, dtype=np.float32),
...                         optimizer_state={"step": np.array(4)}, meta={"source": "doctest"})
...     ck = load_checkpoint(p)
>>> ck.iteration, ck.params.tolist(), int(ck.optimizer_state["step"]), ck.meta
(3, [0.0, 1.0, 2.0, 3.0], 4, {'source': 'doctest'})
"""

from __future__ import annotations

import io
import json
import logging
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workloads.errors import WorkloadError

__all__ = ["FORMAT_VERSION", "Checkpoint", "CheckpointError", "checkpoint_bytes", "load_checkpoint",
           "load_checkpoint_bytes", "save_checkpoint"]

log = logging.getLogger(__name__)

#: the ``format`` entry of the archives this module writes
FORMAT_VERSION = 1
_OPT = "opt_"
_FIXED = ("format", "iteration", "params", "meta")


class CheckpointError(WorkloadError):
    """A checkpoint could not be written or read (missing, truncated, corrupt): names the path."""


@dataclass(frozen=True, kw_only=True, eq=False)
class Checkpoint:
    """What :func:`load_checkpoint` read. ``iteration``: the last completed iteration."""

    iteration: int
    params: np.ndarray
    optimizer_state: dict[str, np.ndarray]
    meta: dict[str, Any]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _arrays(path: Path | str, iteration: int, params: np.ndarray, optimizer_state: Mapping[str, np.ndarray],
            meta: Mapping[str, Any]) -> dict[str, Any]:
    """The archive's entries, checked (``path`` only names the checkpoint in errors)."""
    if isinstance(iteration, bool) or not isinstance(iteration, int | np.integer) or iteration < -1:
        raise ValueError(f"checkpoint {path}: iteration {iteration!r} must be an integer >= -1")
    if not isinstance(params, np.ndarray) or params.dtype != np.float32 or params.ndim != 1:
        raise ValueError(f"checkpoint {path}: params must be a 1-D float32 array, got "
                         f"{getattr(params, 'dtype', type(params).__name__)} of shape "
                         f"{getattr(params, 'shape', None)}")
    try:
        meta_json = json.dumps(dict(meta), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path}: meta is not JSON-serialisable: {exc}") from exc
    arrays: dict[str, Any] = {  # Any: savez types its **kwds against allow_pickle too
        "format": np.array(FORMAT_VERSION, dtype=np.int64),
        "iteration": np.array(int(iteration), dtype=np.int64),
        "params": np.ascontiguousarray(params),
        "meta": np.array(meta_json),
    }
    for name, value in optimizer_state.items():
        arr = np.asarray(value)
        if arr.dtype.hasobject:
            raise ValueError(f"checkpoint {path}: optimizer state {name!r} is an object array")
        arrays[_OPT + name] = arr
    return arrays


def checkpoint_bytes(*, iteration: int, params: np.ndarray, optimizer_state: Mapping[str, np.ndarray],
                     meta: Mapping[str, Any], name: str = "<checkpoint>") -> bytes:
    """A checkpoint as the bytes of its archive (to send to a store over the network)."""
    buf = io.BytesIO()
    np.savez(buf, **_arrays(name, iteration, params, optimizer_state, meta))
    return buf.getvalue()


def save_checkpoint(path: Path, *, iteration: int, params: np.ndarray,
                    optimizer_state: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> Path:
    """Write a checkpoint to ``path`` atomically (creating its directory); returns ``path``.

    ``iteration`` is the last completed iteration (-1: none yet); ``params`` must be a 1-D
    float32 array; ``meta`` must be JSON-serialisable.
    """
    path = Path(path)
    arrays = _arrays(path, iteration, params, optimizer_state, meta)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    log.debug("checkpoint of iteration %d written to %s", iteration, path)
    return path


def load_checkpoint(path: Path) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint`; CheckpointError naming ``path``
    when it is missing, truncated or not a checkpoint."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path}: no such file")
    return _read(path, path)


def load_checkpoint_bytes(data: bytes, source: str) -> Checkpoint:
    """Read a checkpoint from the bytes of its archive (``source`` names it in errors)."""
    return _read(io.BytesIO(data), source)


def _read(f: Path | io.BytesIO, path: Path | str) -> Checkpoint:
    try:
        with np.load(f, allow_pickle=False) as z:
            files = set(z.files)
            missing = [k for k in _FIXED if k not in files]
            if missing:
                raise CheckpointError(f"checkpoint {path}: not a checkpoint "
                                      f"(no {', '.join(missing)})")
            version = int(z["format"])
            iteration = int(z["iteration"])
            params = z["params"].copy()
            meta_json = str(z["meta"])
            opt = {k[len(_OPT):]: z[k].copy() for k in sorted(files) if k.startswith(_OPT)}
    except CheckpointError:
        raise
    except (OSError, ValueError, KeyError, EOFError, TypeError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"checkpoint {path}: corrupt or unreadable: {exc}") from exc
    if version != FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {path}: format {version}, expected {FORMAT_VERSION}")
    if params.dtype != np.float32 or params.ndim != 1:
        raise CheckpointError(f"checkpoint {path}: params are {params.dtype} of shape "
                              f"{params.shape}, expected 1-D float32")
    try:
        meta = json.loads(meta_json)
    except ValueError as exc:
        raise CheckpointError(f"checkpoint {path}: meta is not JSON: {exc}") from exc
    if not isinstance(meta, dict):
        raise CheckpointError(f"checkpoint {path}: meta is {type(meta).__name__}, "
                              "expected an object")
    return Checkpoint(iteration=iteration, params=params, optimizer_state=opt, meta=meta)
