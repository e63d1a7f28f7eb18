"""How a mirrored connection is marked: Checkmate's ToS layout.

The IPv4 ToS byte carries the mirror tag in bit 7, the 5-bit storage session id in bits
6..2 and ECN in bits 1..0 (``hipersys-team/checkmate``, ``switch/p4/headers.p4``). The
switches match it ternary with :data:`TOS_MASK`, so that ECN stays the hosts' business.
"""

from __future__ import annotations

__all__ = ["CLONE_SESSION_BASE", "MAX_SESSION", "TOS_MASK", "clone_session_id", "mirror_tos",
           "session_of"]

MAX_SESSION = 31
TOS_MASK = 0xFC
#: clone session ids used for mirroring: base + Checkmate session id
CLONE_SESSION_BASE = 100


def mirror_tos(session: int) -> int:
    """The ToS byte of a mirrored connection of ``session``.

    >>> hex(mirror_tos(1)), hex(mirror_tos(31))
    ('0x84', '0xfc')
    """
    if not 0 <= session <= MAX_SESSION:
        raise ValueError(f"session id {session} is not in 0..{MAX_SESSION}")
    return 0x80 | session << 2


def session_of(tos: int) -> int | None:
    """The session id a ToS byte carries, or None when its mirror tag is clear.

    >>> session_of(0x84), session_of(0x04)
    (1, None)
    """
    return (tos >> 2) & MAX_SESSION if tos & 0x80 else None


def clone_session_id(session: int) -> int:
    """The switch clone session that copies ``session``'s flows to its shadow."""
    return CLONE_SESSION_BASE + session
