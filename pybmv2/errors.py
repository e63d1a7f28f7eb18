"""The exception hierarchy of the Python P4 target.

Every error the target raises derives from :class:`TargetError`. The P4Runtime server maps
the table-management errors to the canonical gRPC codes that PI returns for the same
mistake, so that a client sees the same status from this target as from BMv2.
"""

from __future__ import annotations

__all__ = [
    "EntryExistsError",
    "EntryNotFoundError",
    "InvalidEntryError",
    "JsonFormatError",
    "PacketError",
    "PacketIOError",
    "TableFullError",
    "TargetError",
    "UnsupportedJsonError",
]


class TargetError(Exception):
    """Base class of every error raised by the Python P4 target."""


class JsonFormatError(TargetError):
    """The BMv2 JSON is malformed: a required key is missing or has the wrong type."""


class UnsupportedJsonError(TargetError):
    """The BMv2 JSON uses a construct this target cannot execute faithfully.

    Raised at load time, never at packet time, so that a program never runs with a silent
    wrong result. The message names the construct and where it appears.
    """


class PacketError(TargetError):
    """A packet made the program do what BMv2 aborts on, such as indexing a header stack out
    of its bounds (BMv2 throws std::out_of_range and the switch dies). Raised at packet time;
    the switch logs it and drops that packet."""


class InvalidEntryError(TargetError):
    """A table entry, default action or PRE entry is malformed (INVALID_ARGUMENT)."""


class EntryExistsError(TargetError):
    """An entry with the same match key (and priority) already exists (ALREADY_EXISTS)."""


class EntryNotFoundError(TargetError):
    """The entry to modify, delete or read does not exist (NOT_FOUND)."""


class TableFullError(TargetError):
    """The table already holds ``max_size`` entries (RESOURCE_EXHAUSTED)."""


class PacketIOError(TargetError):
    """A port could not be opened, read or written."""
