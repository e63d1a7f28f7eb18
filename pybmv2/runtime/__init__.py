"""The P4Runtime server of the Python P4 target.

Layers, from pure logic to gRPC I/O:

- :mod:`~pybmv2.runtime.p4info`: P4Info index and its binding to a loaded BMv2 JSON;
- :mod:`~pybmv2.runtime.values`, :mod:`~pybmv2.runtime.wire`: table entries as plain
  values, from protobuf messages or decoded straight from a WriteRequest's wire bytes;
- :mod:`~pybmv2.runtime.codec`, :mod:`~pybmv2.runtime.packetio`,
  :mod:`~pybmv2.runtime.pre_codec`: protobuf <-> target translation with PI's validation;
- :mod:`~pybmv2.runtime.arbitration`, :mod:`~pybmv2.runtime.digests`: client arbitration and
  digest batching;
- :mod:`~pybmv2.runtime.table_ops`, :mod:`~pybmv2.runtime.profile_ops`,
  :mod:`~pybmv2.runtime.extern_ops`, :mod:`~pybmv2.runtime.table_reads` (with
  :mod:`~pybmv2.runtime.read_wire`), :mod:`~pybmv2.runtime.reconcile`,
  :mod:`~pybmv2.runtime.device`: entity writes/reads and pipeline config (PI's DeviceMgr);
- :mod:`~pybmv2.runtime.service`, :mod:`~pybmv2.runtime.raw_write`,
  :mod:`~pybmv2.runtime.raw_read`, :mod:`~pybmv2.runtime.server`: the gRPC servicer, the
  serialized Write and Read handlers and :class:`P4RuntimeServer`.
"""

from pybmv2.runtime.errors import P4RuntimeError
from pybmv2.runtime.server import P4RuntimeServer, ServerOptions

__all__ = ["P4RuntimeError", "P4RuntimeServer", "ServerOptions"]
