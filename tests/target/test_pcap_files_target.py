"""BMv2 on pcap files (packettest.pcap_target): frames of any size, no veth pairs. The
differential check of p4c's samples (bench/p4c_samples.py) uses it for packets shorter than
an Ethernet header, which a packet socket cannot send."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conformance_cases import probe

from controller.p4build import PROGRAM_DIRS, pipeline_files
from packettest import open_target
from packettest.pcap_target import PcapFilesTarget

pytestmark = pytest.mark.skipif(shutil.which("simple_switch_grpc") is None,
                                reason="simple_switch_grpc is not installed")


def test_short_and_normal_frames_give_what_the_python_target_gives(tmp_path: Path) -> None:
    artifact = pipeline_files("arith", PROGRAM_DIRS[1])
    frames = [probe(0, 200, 100, 300, 400, 5, 10), probe(1, 0, 4)[:9], bytes(3)]
    with PcapFilesTarget(artifact, (1, 2), 1, tmp_path) as bmv2, open_target("python", artifact) as py:
        for frame in frames:
            assert sorted(bmv2.send(1, frame)) == sorted(py.send(1, frame))
        with pytest.raises(ValueError, match="packets enter by port 1 only"):
            bmv2.send(2, frames[0])
