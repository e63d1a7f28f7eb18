"""Frames for the CLI's packet commands, built and dissected with scapy (pure).

:func:`frame_from_scapy` evaluates an expression over scapy's layers only (no builtins, no
names from elsewhere), as p4runtime-shell users write them: ``Ether()/IP(dst="10.0.1.1")/UDP()``.
"""

from __future__ import annotations

from controller.errors import MlfabricError

__all__ = ["dissect", "frame_from_hex", "frame_from_scapy"]


def _layers() -> dict[str, object]:
    from scapy import all as scapy_all

    return {name: getattr(scapy_all, name) for name in dir(scapy_all) if not name.startswith("_")}


def frame_from_scapy(expr: str) -> bytes:
    """The bytes of a scapy expression.

    >>> frame_from_scapy('Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:00:01", type=0x88b5)')[:14].hex()
    'ffffffffffff02000000000188b5'
    """
    try:
        packet = eval(expr, {"__builtins__": {}}, _layers())
        return bytes(packet)
    except Exception as exc:  # a typo, an unknown layer or field: say which, in one line
        raise MlfabricError(f"--scapy {expr[:60]!r}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                            ) from None


def frame_from_hex(text: str) -> bytes:
    """The bytes of a hex string (``:`` and spaces ignored).

    >>> frame_from_hex("ff:ff 00").hex()
    'ffff00'
    """
    try:
        return bytes.fromhex(text.replace(":", "").replace(" ", ""))
    except ValueError:
        raise MlfabricError(f"--hex {text[:20]!r}: not hexadecimal") from None


def dissect(frame: bytes) -> str:
    """scapy's one-line summary of an Ethernet frame.

    >>> dissect(frame_from_scapy('Ether()/IP(src="10.0.0.1", dst="10.0.1.1")/UDP(sport=40000, dport=40001)'))
    'Ether / IP / UDP 10.0.0.1:40000 > 10.0.1.1:40001'
    """
    from scapy.layers.l2 import Ether

    return str(Ether(frame).summary())
