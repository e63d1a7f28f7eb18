"""Values in natural notation <-> P4Runtime canonical bytestrings.

Operators write ``10.0.0.1``, ``aa:bb:cc:dd:ee:ff``, ``10.0.0.0/8``, ``0x0800&&&0xffff``,
``1000..2000`` or plain integers; P4Runtime carries big-endian bytestrings without leading
zero bytes (the canonical form of the spec, section 8.4).
"""

from __future__ import annotations

import ipaddress
import re

from controller.errors import MlfabricError

__all__ = [
    "BadValue",
    "decode_int",
    "encode_int",
    "format_value",
    "parse_int",
]


class BadValue(MlfabricError):
    """A value does not parse, or does not fit its field."""


_MAC = re.compile(r"^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$")


def parse_int(text: str | int, width: int, what: str = "value") -> int:
    """Parse a natural-notation value for a ``width``-bit field and check it fits.

    >>> parse_int("10.0.0.1", 32), parse_int("00:00:00:00:00:0a", 48), parse_int("0x1f", 9)
    (167772161, 10, 31)
    >>> parse_int("600", 9)
    Traceback (most recent call last):
    ...
    controller.p4runtime.values.BadValue: value 600 does not fit in 9 bits (max 511)
    """
    if isinstance(text, bool):
        value = int(text)
    elif isinstance(text, int):
        value = text
    else:
        s = text.strip()
        try:
            if _MAC.match(s):
                value = int(s.replace(":", "").replace("-", ""), 16)
            elif s.count(".") == 3:
                value = int(ipaddress.IPv4Address(s))
            elif ":" in s:
                value = int(ipaddress.IPv6Address(s))
            else:
                value = int(s, 0)
        except ValueError:
            raise BadValue(f"cannot parse {what} {text!r}: expected an integer, IPv4, IPv6 or MAC address") from None
    if value < 0:
        raise BadValue(f"{what} {text!r} is negative")
    if value >> width:
        raise BadValue(f"{what} {text} does not fit in {width} bits (max {(1 << width) - 1})")
    return value


def encode_int(value: int, width: int) -> bytes:
    """Canonical bytestring: big-endian, no leading zero bytes (zero is one zero byte).

    >>> encode_int(0x0800, 16), encode_int(0, 9), encode_int(5, 48)
    (b'\\x08\\x00', b'\\x00', b'\\x05')
    """
    if value >> width:
        raise BadValue(f"value {value} does not fit in {width} bits")
    n = max(1, (value.bit_length() + 7) // 8)
    return value.to_bytes(n, "big")


def decode_int(data: bytes) -> int:
    return int.from_bytes(data, "big")


def format_value(value: int, width: int, hint: str = "") -> str:
    """Natural notation for display: IPv4 for 32-bit address-like names, MAC for 48 bits.

    >>> format_value(167772161, 32, "hdr.ipv4.dst_addr"), format_value(10, 48)
    ('10.0.0.1', '00:00:00:00:00:0a')
    """
    if width == 48:
        raw = value.to_bytes(6, "big").hex()
        return ":".join(raw[i : i + 2] for i in range(0, 12, 2))
    if width == 32 and any(k in hint.lower() for k in ("addr", "ip", "src", "dst")):
        return str(ipaddress.IPv4Address(value))
    if width == 128:
        return str(ipaddress.IPv6Address(value))
    if width > 16:
        return hex(value)
    return str(value)
