"""A Read's answer as a stream of ReadResponses, each under a size any client accepts.

P4Runtime's Read is a server stream. gRPC clients refuse, by default, any message over
4 MiB (``grpc.max_receive_message_length``), and a table of 100,000 time-flow entries
encodes to about 6 MB: sent as one ReadResponse, a client with default settings cannot read
it. The target therefore sends its answer as consecutive ReadResponses of at most
:data:`MAX_RESPONSE_BYTES` each (an entity bigger than that travels alone). A client
concatenating the streams' ``entities`` gets exactly the single response's entities, in
the same order.

A ``ReadResponse`` has one field, ``repeated Entity entities = 1``, so its wire bytes are
the concatenation of its entities, each framed as field 1; splitting a response is
cutting between frames.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

__all__ = ["MAX_RESPONSE_BYTES", "entity_frames", "responses"]

#: the largest ReadResponse the target sends, a quarter of gRPC's default 4 MiB limit
MAX_RESPONSE_BYTES = 1 << 20
_ENTITIES_TAG = 0x0A  # field 1, length-delimited


def _varint_at(data: bytes, pos: int) -> tuple[int, int]:
    """The varint starting at ``pos`` and the position after it."""
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint in a serialized ReadResponse")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def entity_frames(response: bytes) -> Iterator[bytes]:
    """The framed ``entities`` fields of a serialized ReadResponse, one by one.

    >>> list(entity_frames(b"\\x0a\\x01x\\x0a\\x00"))
    [b'\\n\\x01x', b'\\n\\x00']
    """
    pos = 0
    while pos < len(response):
        if response[pos] != _ENTITIES_TAG:
            raise ValueError(f"unexpected field tag {response[pos]:#x} in a serialized ReadResponse")
        length, body = _varint_at(response, pos + 1)
        end = body + length
        if end > len(response):
            raise ValueError("truncated entity in a serialized ReadResponse")
        yield response[pos:end]
        pos = end


def responses(frames: Iterable[bytes], limit: int = MAX_RESPONSE_BYTES) -> Iterator[bytes]:
    """Group framed entities into serialized ReadResponses of at most ``limit`` bytes each
    (a single frame over ``limit`` is a response of its own). Always yields at least one
    response, empty for an empty answer, as PI does.

    >>> [len(r) for r in responses([b"a" * 6, b"b" * 6, b"c" * 20], limit=12)]
    [12, 20]
    >>> list(responses([]))
    [b'']
    """
    if limit < 1:
        raise ValueError(f"a ReadResponse limit must be positive, got {limit}")
    pending: list[bytes] = []
    size = 0
    sent = False
    for frame in frames:
        if pending and size + len(frame) > limit:
            yield b"".join(pending)
            sent = True
            pending, size = [], 0
        pending.append(frame)
        size += len(frame)
    if pending or not sent:
        yield b"".join(pending)
