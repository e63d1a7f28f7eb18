"""A forwarding pipeline config checked against its program, and its P4Runtime-side state.

:func:`build_pipeline` turns a ``ForwardingPipelineConfig`` (P4Info + BMv2 JSON in
``p4_device_config``) into a :class:`Pipeline` without touching the switch, so that VERIFY
can run it alone; committing is ``switch.load(pipeline.program)``. The Pipeline also keeps
what the data plane does not: controller metadata of default entries, the port form of PRE
replicas and the digest buffers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from pybmv2.errors import TargetError
from pybmv2.pre import Replica
from pybmv2.program import Program
from pybmv2.runtime.digests import DigestEngine
from pybmv2.runtime.errors import P4RuntimeError, from_target_error
from pybmv2.runtime.hash_order import StdHashOrder
from pybmv2.runtime.idle_timeouts import AgeingMonitor
from pybmv2.runtime.p4info import (
    ControllerHeader,
    P4Ids,
    P4InfoIndex,
    PipelineBinding,
    TableBinding,
    bind,
)
from pybmv2.runtime.packetio import PACKET_IN, PACKET_OUT
from pybmv2.runtime.profile_ops import ProfileManager
from pybmv2.runtime.read_wire import TableEncoder
from pybmv2.runtime.values import ActionValue
from pybmv2.startup import StartupPhases
from pybmv2.tables import ActionCall, MatchTable

__all__ = ["Pipeline", "build_pipeline", "invalid_id"]

_TABLE = P4Ids.TABLE  # an EnumTypeWrapper attribute look-up is slow, and this one is hot


def invalid_id() -> P4RuntimeError:
    """PI's ``make_invalid_p4_id_status``."""
    return P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, "Invalid P4 id")


@dataclass
class Pipeline:
    """One verified pipeline: program, P4Info index and binding, and P4Runtime state."""

    program: Program
    p4info: p4info_pb2.P4Info
    device_config: bytes
    cookie: p4runtime_pb2.ForwardingPipelineConfig.Cookie | None
    index: P4InfoIndex
    binding: PipelineBinding
    digests: DigestEngine
    packet_in: ControllerHeader | None
    packet_out: ControllerHeader | None
    #: JSON table name -> target table (ingress and egress)
    tables: dict[str, MatchTable] = field(default_factory=dict)
    #: table id -> (controller_metadata, metadata) of its default entry
    default_metadata: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    group_forms: dict[int, dict[Replica, int]] = field(default_factory=dict)
    group_metadata: dict[int, bytes] = field(default_factory=dict)
    session_forms: dict[int, dict[Replica, int]] = field(default_factory=dict)
    #: PI's map of multicast groups (a clone session's is 2^15 + its id) and its map of
    #: clone sessions, in their hash-map order: what a wildcard read iterates
    group_order: StdHashOrder = field(default_factory=StdHashOrder)
    session_order: StdHashOrder = field(default_factory=StdHashOrder)
    #: (table id, action value) -> its validated ActionCall, a memo of
    #: :func:`pybmv2.runtime.codec.action_call` (a pure function of the pipeline)
    action_calls: dict[tuple[int, ActionValue], ActionCall] = field(default_factory=dict)
    #: the same, for the actions checked as a non-default entry's of that (direct) table
    entry_calls: dict[tuple[int, ActionValue], ActionCall] = field(default_factory=dict)
    #: P4Info action profile id -> its member and group state
    profiles: dict[int, ProfileManager] = field(default_factory=dict)
    #: P4Info table id -> the wire encoder of its entries (a cache, filled by reads)
    read_encoders: dict[int, TableEncoder] = field(default_factory=dict)
    #: the switch's clock, µs (entries' idle timeouts run on it; the device sets it)
    clock_us: Callable[[], int] = field(default=lambda: 0)
    #: the idle-timeout sweeps of the tables with support_timeout
    ageing: AgeingMonitor = field(default_factory=AgeingMonitor)
    #: table id -> :meth:`table`'s answer (a pipeline's tables never change)
    _found_tables: dict[int, tuple[TableBinding, MatchTable]] = field(default_factory=dict)

    def table(self, table_id: int) -> tuple[TableBinding, MatchTable]:
        """The binding and target table of a P4Info table id (INVALID_ARGUMENT if none)."""
        found = self._found_tables.get(table_id)
        if found is not None:
            return found
        if not self.index.is_valid_id(table_id, _TABLE):
            raise invalid_id()
        tb = self.binding.tables.get(table_id)
        if tb is None:  # BMv2 answers UNKNOWN ("Error when ... from target")
            raise P4RuntimeError(grpc.StatusCode.UNKNOWN,
                                 f"table {self.index.tables[table_id].name!r} is in the P4Info "
                                 "but not in the BMv2 JSON: the target has no such table")
        found = self._found_tables[table_id] = (tb, self.tables[tb.target_name])
        return found

    def to_config(self) -> p4runtime_pb2.ForwardingPipelineConfig:
        config = p4runtime_pb2.ForwardingPipelineConfig()
        config.p4info.CopyFrom(self.p4info)
        config.p4_device_config = self.device_config
        if self.cookie is not None:
            config.cookie.CopyFrom(self.cookie)
        return config


def _release_initial_entries(index: P4InfoIndex, binding: PipelineBinding,
                             program: Program) -> None:
    """Let clients modify the initial entries of tables that are not ``const entries``.

    The BMv2 JSON lists the ``entries`` of a table without saying which are ``const``, and
    the loader marks them all const. The P4Info does say whether the whole table is const
    (``is_const_table``); for a preinitialized table that is not, the spec lets the client
    modify and delete the initial entries, so they are released here (an individual
    ``const`` entry of such a table cannot be told apart and is released too).
    """
    tables = program.tables
    for table_id, tb in binding.tables.items():
        if index.tables[table_id].is_const_table:
            continue
        for entry in tables[tb.target_name].entries():
            entry.is_const = False


def build_pipeline(config: p4runtime_pb2.ForwardingPipelineConfig,
                   startup: StartupPhases | None = None) -> Pipeline:
    """Load the BMv2 JSON of a config and check its P4Info against it (the phases of that
    go to ``startup``, when given).

    Raises P4RuntimeError: INVALID_ARGUMENT for an empty or mismatched config, the mapped
    code of the target error for a JSON the target cannot load.
    """
    if not config.HasField("p4info"):
        raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT,
                             "ForwardingPipelineConfig has no p4info")
    device_config = bytes(config.p4_device_config)
    if not device_config:
        raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT,
                             "p4_device_config is empty: expected the BMv2 JSON")
    try:
        program = Program.from_text(device_config, source="p4_device_config")
    except TargetError as exc:
        err = from_target_error(exc)
        raise P4RuntimeError(err.code, f"Error in first phase of device update: "
                             f"{err.message}") from exc
    if startup is not None:
        startup.lap("BMv2 JSON to the Python engine's program")
    index = P4InfoIndex(config.p4info)
    binding = bind(index, program)
    _release_initial_entries(index, binding, program)
    p4info = p4info_pb2.P4Info()
    p4info.CopyFrom(config.p4info)
    cookie = None
    if config.HasField("cookie"):
        cookie = p4runtime_pb2.ForwardingPipelineConfig.Cookie()
        cookie.CopyFrom(config.cookie)
    pipeline = Pipeline(
        program=program,
        p4info=p4info,
        device_config=device_config,
        cookie=cookie,
        index=index,
        binding=binding,
        digests=DigestEngine(index.digests),
        packet_in=index.controller_headers.get(PACKET_IN),
        packet_out=index.controller_headers.get(PACKET_OUT),
        tables=program.tables,
        profiles={
            pid: ProfileManager(index.action_profiles[pid], profile,
                                [binding.tables[t] for t in index.action_profiles[pid].table_ids
                                 if t in binding.tables])
            for pid, profile in binding.action_profiles.items()
        },
    )
    if startup is not None:
        startup.lap("P4Info: index and binding")
    return pipeline
