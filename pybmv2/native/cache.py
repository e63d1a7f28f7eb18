"""A warm start without code generation: the index from a program's BMv2 JSON to its engine.

:func:`~pybmv2.native.build.build` caches a shared object by the generated C source, so
finding it needs the source, and the source needs the generator. This index goes straight
from the program to the shared object and the manifest built for it:
``<cache>/<key>.index`` (``<cache>`` as for :func:`~pybmv2.native.build.build`), where the
key covers

- the sha256 of the BMv2 JSON text (:attr:`Program.source_sha256 <pybmv2.program.Program>`);
- the generator's fingerprint: the sha256 of every source file of the ``pybmv2`` package,
  the C runtime (``native/csrc``) included, so that any change to the generator, the C
  runtime or the Python engine's reading of the JSON misses and generates again (and a
  changed C source compiles again);
- the compiler's identity without running it: its resolved path, inode, size and mtime
  (an upgrade replaces the file), and the flags.

An entry is written atomically after a build; one that cannot be read is a miss.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import pickle
import tempfile
from pathlib import Path

from pybmv2.native.build import CFLAGS, cache_dir
from pybmv2.native.manifest import NativeManifest

__all__ = ["INDEX_VERSION", "PACKAGE_ROOT", "compiler_identity", "generator_fingerprint",
           "index_key", "lookup", "store"]

log = logging.getLogger(__name__)

#: the format of the index entries (part of the key)
INDEX_VERSION = "mlfabric-native-index-1"
#: the pybmv2 package: its sources make the generator's fingerprint
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
_SOURCE_SUFFIXES = (".py", ".c", ".h")


@functools.lru_cache(maxsize=4)
def generator_fingerprint(root: Path = PACKAGE_ROOT) -> str:
    """The sha256 of the names and contents of every source file under ``root`` (``.py``,
    ``.c``, ``.h``; caches skipped), in a fixed order: computed once per process."""
    h = hashlib.sha256()
    stack = [root]
    files: list[Path] = []
    while stack:
        folder = stack.pop()
        for item in os.scandir(folder):
            if item.is_dir(follow_symlinks=False):
                if item.name != "__pycache__":
                    stack.append(Path(item.path))
            elif item.name.endswith(_SOURCE_SUFFIXES):
                files.append(Path(item.path))
    for path in sorted(files):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def compiler_identity(cc: str) -> str:
    """The compiler as a string that changes when it is replaced, without running it."""
    real = os.path.realpath(cc)
    try:
        st = os.stat(real)
    except OSError:
        return real
    return f"{real}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def index_key(json_sha256: str, cc: str, fingerprint: str | None = None) -> str:
    """The index key of a program (by its JSON's sha256) built by compiler ``cc``."""
    fp = generator_fingerprint() if fingerprint is None else fingerprint
    parts = (INDEX_VERSION, json_sha256, fp, compiler_identity(cc), *CFLAGS)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def lookup(key: str) -> tuple[Path, NativeManifest] | None:
    """The shared object and manifest recorded under ``key``, or None (no entry, an entry
    that cannot be read, or a shared object gone from the cache)."""
    path = cache_dir() / f"{key}.index"
    try:
        with open(path, "rb") as f:
            name, manifest = pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception as exc:
        log.info("ignoring the unreadable native cache entry %s: %s", path, exc)
        return None
    so = cache_dir() / str(name)
    if not isinstance(manifest, NativeManifest) or not so.exists():
        return None
    return so, manifest


def store(key: str, so: Path, manifest: NativeManifest) -> None:
    """Record ``so`` (in the cache folder) and ``manifest`` under ``key``; an index that
    cannot be written only costs the next start its code generation."""
    out = cache_dir()
    try:
        fd, tmp = tempfile.mkstemp(dir=out, prefix=".index-")
    except OSError as exc:
        log.info("cannot write the native cache index in %s: %s", out, exc)
        return
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump((so.name, manifest), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, out / f"{key}.index")
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        log.info("cannot write the native cache index in %s: %s", out, exc)
