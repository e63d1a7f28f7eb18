"""The per-packet state that a compiled program reads and writes."""

from __future__ import annotations

__all__ = ["INSTANCE_TYPE", "PacketState"]

#: simple_switch's PKT_INSTANCE_TYPE_* values for standard_metadata.instance_type
INSTANCE_TYPE = {
    "normal": 0,
    "ingress_clone": 1,
    "egress_clone": 2,
    "coalesced": 3,
    "recirc": 4,
    "replication": 5,
    "resubmit": 6,
}


class PacketState:
    """The PHV of one packet plus the packet-level registers simple_switch keeps.

    ``values`` holds one int per field slot (see :class:`pybmv2.layout.PhvLayout`),
    ``valid`` one bool per header. ``data`` is the received frame and ``offset`` the
    parser's cursor into it: after parsing, ``data[offset:]`` is the payload.
    """

    __slots__ = (
        "args",
        "checksum_error",
        "clone_field_list",
        "clone_session",
        "data",
        "error",
        "exit",
        "learn_id",
        "offset",
        "pkt_len",
        "recirculate",
        "resubmit",
        "stack_next",
        "truncate_len",
        "valid",
        "values",
    )

    def __init__(self, values: list[int], valid: list[bool], nstacks: int, data: bytes) -> None:
        self.values = values
        self.valid = valid
        self.stack_next = [0] * nstacks
        self.data = data
        self.offset = 0
        self.args: list[int] = []
        self.exit = False
        self.error = 0
        self.checksum_error = False
        #: mirror session id | VALID_MASK, as RegisterAccess stores it; 0 when no clone
        self.clone_session = 0
        self.clone_field_list = 0
        self.resubmit = 0
        self.recirculate = 0
        self.learn_id = 0
        self.truncate_len = 0
        self.pkt_len = len(data)

    @property
    def payload(self) -> bytes:
        return self.data[self.offset :]

    def copy(self, values: list[int] | None = None) -> PacketState:
        """A copy of the packet; ``values`` is its field storage (by default a full copy;
        the switch passes what its PHV pool gives, see :mod:`pybmv2.phv_pool`)."""
        twin = PacketState(list(self.values) if values is None else values, list(self.valid), 0,
                           self.data)
        twin.stack_next = list(self.stack_next)
        twin.offset = self.offset
        twin.error = self.error
        twin.checksum_error = self.checksum_error
        twin.pkt_len = self.pkt_len
        twin.truncate_len = self.truncate_len
        return twin
