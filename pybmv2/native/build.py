"""Build the generated C with the system's compiler, cached by content.

The shared object for a source lives at ``<cache>/<sha256>.so`` where the hash covers the
source, the compiler's version line and the flags; ``$MLFABRIC_NATIVE_CACHE`` names the
cache (default ``~/.cache/mlfabric/native``). A build writes a temporary file and renames
it, so concurrent builds of the same program are safe.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from pybmv2.native.errors import NativeBuildError

__all__ = ["CFLAGS", "build", "cache_dir", "compiler"]

log = logging.getLogger(__name__)

CFLAGS = ("-O2", "-shared", "-fPIC", "-std=gnu11", "-pthread", "-fvisibility=hidden", "-w")
#: seconds a compilation may take
BUILD_TIMEOUT = 600


def compiler() -> str | None:
    """The C compiler to use: ``$CC``, else ``cc`` or ``gcc`` on the PATH (None: none)."""
    cc = os.environ.get("CC")
    if cc:
        return shutil.which(cc)
    return shutil.which("cc") or shutil.which("gcc")


@functools.lru_cache(maxsize=8)
def _version(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30,
                             check=False)
    except OSError as exc:
        raise NativeBuildError(f"cannot run the C compiler {cc}: {exc.strerror}") from exc
    return (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else cc


def cache_dir() -> Path:
    env = os.environ.get("MLFABRIC_NATIVE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mlfabric" / "native"


def build(source: str, *, flags: tuple[str, ...] = (), what: str = "the native engine") -> Path:
    """The shared object built from ``source`` (compiled now unless cached), with ``flags``
    after :data:`CFLAGS`; ``what`` names it in the log and in errors."""
    cc = compiler()
    if cc is None:
        raise NativeBuildError("no C compiler: install gcc (Debian: apt-get install gcc "
                               "libc6-dev) or set CC")
    key = hashlib.sha256("\0".join((source, _version(cc), *CFLAGS, *flags)).encode()).hexdigest()
    out_dir = cache_dir()
    target = out_dir / f"{key}.so"
    if target.exists():
        return target
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NativeBuildError(f"cannot create the native cache {out_dir}: {exc.strerror}") \
            from exc
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".build-") as tmp:
        src = Path(tmp) / f"{key}.c"
        src.write_text(source)
        obj = Path(tmp) / f"{key}.so"
        log.info("compiling %s (%d lines of C) with %s", what, source.count("\n"), cc)
        try:
            done = subprocess.run([cc, *CFLAGS, *flags, "-o", str(obj), str(src)], capture_output=True,
                                  text=True, timeout=BUILD_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NativeBuildError(f"the C compiler {cc} failed to run: {exc}") from exc
        if done.returncode != 0:
            raise NativeBuildError(f"{cc} failed on the source of {what} (exit "
                                   f"{done.returncode}):\n{done.stderr[-4000:]}")
        os.replace(obj, target)
    return target
