"""simple_switch_grpc reading and writing pcap files instead of interfaces (``--use-files``).

No root and no veth pairs, and frames of any size: a packet socket cannot send a frame
shorter than an Ethernet header, and p4c's sample tests send many. Each port that packets
enter by is a FIFO the switch reads; every other port gets an empty capture. BMv2 reads its
inputs in timestamp order across files and blocks on a FIFO with nothing in it, so packets
may enter by one port only (``ports_in``).
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import time
from collections.abc import Sequence
from pathlib import Path

from controller.netstate import NetRecord
from controller.p4build import Artifact
from controller.p4runtime.client import P4RuntimeClient
from controller.readiness import free_tcp_port
from controller.switch_process import CPU_PORT, SwitchProcess, SwitchSpec
from packettest.targets import Outputs, PacketTarget, _load_pipeline

__all__ = ["PcapFilesTarget", "TargetRefused"]

_GLOBAL = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
_RECORD = struct.Struct("<IIII")


class TargetRefused(RuntimeError):
    """BMv2 accepted the pipeline over P4Runtime but could not load its JSON (it says so
    only in its output), or it died running a packet."""


class PcapFilesTarget(PacketTarget):
    """BMv2 on pcap files in ``folder`` with ``artifact`` loaded."""

    kind = "bmv2-files"

    def __init__(self, artifact: Artifact, ports: Sequence[int], port_in: int, folder: Path, *,
                 device_id: int = 1, cpu_port: int = CPU_PORT) -> None:
        self._stack = contextlib.ExitStack()
        self._folder = folder
        self._offsets: dict[int, int] = {}
        self.port_in = port_in
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for port in set(ports) | {port_in}:
                path = folder / f"{port}_in.pcap"
                path.unlink(missing_ok=True)
                if port == port_in:
                    os.mkfifo(path)
                    # read-write: opening never blocks, and BMv2's open finds a writer
                    self._fifo = os.open(path, os.O_RDWR)
                    self._stack.callback(os.close, self._fifo)
                    os.write(self._fifo, _GLOBAL)
                else:
                    path.write_bytes(_GLOBAL)
                (folder / f"{port}_out.pcap").unlink(missing_ok=True)
                self._offsets[port] = len(_GLOBAL)
            record = self._stack.enter_context(NetRecord("packettest-bmv2-files"))
            spec = SwitchSpec(name="bmv2-files", target="bmv2",
                              ports={p: str(folder / str(p)) for p in self._offsets},
                              device_id=device_id, grpc_address=f"127.0.0.1:{free_tcp_port()}",
                              cpu_port=cpu_port, log_dir=folder,
                              switch_args=("--use-files", "0"),  # its Thrift port: SwitchProcess picks one
                              wrapper=("stdbuf", "-oL", "-eL"))
            self._process = self._stack.enter_context(SwitchProcess(spec, record))
            self._log = folder / f"{spec.name}.log"
            self.client = P4RuntimeClient(spec.grpc_address, device_id=device_id).connect()
            self._stack.callback(self.client.close)
            self.schema = _load_pipeline(self.client, artifact)
            log = self._log.read_text(errors="replace")
            bad = re.search(r"^(Invalid .*|bad json.*)$", log, re.MULTILINE)
            if bad:  # BMv2 prints this and keeps running without the program
                raise TargetRefused(f"BMv2 refuses the JSON: {bad.group(1)}")
        except BaseException:
            self._stack.close()
            raise

    def _read_new(self) -> Outputs:
        out: Outputs = []
        for port, offset in self._offsets.items():
            path = self._folder / f"{port}_out.pcap"
            if not path.exists():
                continue
            data = path.read_bytes()
            while offset + _RECORD.size <= len(data):
                _, _, caplen, _ = _RECORD.unpack_from(data, offset)
                end = offset + _RECORD.size + caplen
                if end > len(data):
                    break
                out.append((port, data[offset + _RECORD.size : end]))
                offset = end
            self._offsets[port] = offset
        return out

    def send(self, port: int, frame: bytes, *, expect: int | None = None,
             quiet: float = 0.15, limit: float = 2.0) -> Outputs:
        if port != self.port_in:
            raise ValueError(f"packets enter by port {self.port_in} only, not {port}")
        self._read_new()
        ts = time.time()
        sec = int(ts)
        os.write(self._fifo, _RECORD.pack(sec, int((ts - sec) * 1e6), len(frame), len(frame)) + frame)
        out: Outputs = []
        start = last = time.monotonic()
        while time.monotonic() - start < limit:
            if expect is not None and len(out) >= expect:
                break
            new = self._read_new()
            if new:
                out += new
                last = time.monotonic()
            elif time.monotonic() - last > quiet:
                break
            time.sleep(0.01)
        proc = self._process.proc
        if proc is not None and proc.poll() is not None:  # e.g. a failed assertion in BMv2
            lines = self._log.read_text(errors="replace").strip().splitlines()
            raise TargetRefused(f"BMv2 aborted (status {proc.returncode}): "
                                f"{lines[-1] if lines else 'no output'}")
        return out

    def close(self) -> None:
        self._stack.close()
