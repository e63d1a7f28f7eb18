"""Reading a YAML input file (topology, schedule, job) strictly: every problem, from a missing
or binary file to a syntax error or an oversized file, is one :class:`ConfigError` line that
names the file and says where, never a traceback and never the file's contents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from controller.errors import ConfigError

__all__ = ["MAX_BYTES", "read_yaml"]

#: the largest input file accepted: a 16,384-GPU rail-only topology is about 6 MB
MAX_BYTES = 16 << 20


def read_yaml(path: str | Path, *, max_bytes: int = MAX_BYTES) -> Any:
    """The parsed document of ``path`` (a mapping is the caller's to check).

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("wb", suffix=".yaml", delete=False) as f:
    ...     _ = f.write(b"name: [x\\n")
    >>> try:
    ...     read_yaml(f.name)
    ... except ConfigError as e:
    ...     print(str(e).split(": ", 1)[1][:40])
    YAML: not valid YAML at line 2, column 1
    >>> os.unlink(f.name)
    """
    p = Path(path)
    name = str(p)
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise ConfigError(name, "file", f"{size / 1e6:.1f} MB",
                              f"larger than {max_bytes >> 20} MB: not a topology, schedule or job file")
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(name, "file", None, f"cannot read it: {exc.strerror or exc}") from None
    if not data.strip():
        raise ConfigError(name, "file", None, "is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(name, "file", None, f"is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                                              f"{exc.start}): is it a YAML file?") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's: three times faster
    try:
        return yaml.load(text, Loader=loader)  # a safe loader, C or Python
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(name, "YAML", None, f"not valid YAML{where}: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(name, "YAML", None, f"not valid YAML: {str(exc).splitlines()[0]}") from None


def int_field(source: str, key: str, value: Any, lo: int, hi: int) -> int:
    """``value`` as an integer in ``lo..hi``, else a ConfigError naming ``source`` and ``key``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(source, key, value, "expected an integer")
    if not lo <= value <= hi:
        raise ConfigError(source, key, value, f"must be in {lo}..{hi}")
    return value


def str_field(source: str, key: str, value: Any) -> str:
    """``value`` as a non-empty string, else a ConfigError naming ``source`` and ``key``."""
    if not isinstance(value, str) or not value:
        raise ConfigError(source, key, value, "expected a non-empty string")
    return value
