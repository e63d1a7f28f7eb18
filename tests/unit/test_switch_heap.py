"""The switch process settles its heap after each pipeline commit (pybmv2.heap)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2

from pybmv2.heap import settle_heap
from pybmv2.runtime.device import DeviceManager
from pybmv2.runtime.errors import P4RuntimeError
from pybmv2.runtime.testing import load_config
from pybmv2.switch import V1Switch

pytestmark = pytest.mark.unit

BUILD = Path(__file__).parents[2] / "p4src" / "build"
Set = p4runtime_pb2.SetForwardingPipelineConfigRequest


def test_settle_heap_freezes_what_survives_a_collection() -> None:
    class Cycle:
        pass

    garbage = Cycle()
    garbage.me = garbage  # type: ignore[attr-defined]
    del garbage
    try:
        settle_heap()
        assert gc.get_freeze_count() > 0
        assert not [o for o in gc.get_objects() if isinstance(o, Cycle)]  # collected first
    finally:
        gc.unfreeze()


def test_after_commit_runs_once_per_commit_and_not_for_a_verify() -> None:
    dev = DeviceManager(V1Switch(None, cpu_port=510), 1)
    commits: list[int] = []
    dev.after_commit = lambda: commits.append(1)
    config = load_config(BUILD / "rail_switch.p4info.txtpb", BUILD / "rail_switch.json")
    dev.set_pipeline(Set.VERIFY, config)
    dev.set_pipeline(Set.VERIFY_AND_SAVE, config)
    assert commits == []
    dev.set_pipeline(Set.COMMIT, p4runtime_pb2.ForwardingPipelineConfig())
    dev.set_pipeline(Set.VERIFY_AND_COMMIT, config)
    with pytest.raises(P4RuntimeError, match="reconciling"):  # as PI: counters cannot be inserted
        dev.set_pipeline(Set.RECONCILE_AND_COMMIT, config)
    assert len(commits) == 3  # the new pipeline is committed all the same
