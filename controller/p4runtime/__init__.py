"""P4Runtime layers of the controller: schema (P4Info index) -> entities (pure encode and
decode) -> client (gRPC)."""

from controller.p4runtime.client import P4ClientError, P4RuntimeClient, UpdateError
from controller.p4runtime.entities import Exact, Lpm, Optional, Range, TableRule, Ternary
from controller.p4runtime.schema import P4Schema, SchemaError

__all__ = [
    "Exact",
    "Lpm",
    "Optional",
    "P4ClientError",
    "P4RuntimeClient",
    "P4Schema",
    "Range",
    "SchemaError",
    "TableRule",
    "Ternary",
    "UpdateError",
]
