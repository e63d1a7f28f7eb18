"""``mlfabric cluster check``: per machine, whether what a fabric needs is there. The probe is
one shell script run over SSH (:func:`probe_script`); reading its answer and judging it are
pure (:func:`parse_probe`, :func:`judge_machine`)."""

from __future__ import annotations

import hashlib
import shlex
import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from controller.cluster.machines import Machine, Machines
from controller.cluster.ssh import ssh_argv
from controller.cluster.tunnels import OVERHEAD
from controller.topology.model import JUMBO_MTU

__all__ = ["MachineCheck", "check_machines", "judge_machine", "parse_probe", "probe_script"]

PROBE_TIMEOUT_S = 30.0


def probe_script(machine: Machine, others: list[str], tunnel: str) -> str:
    """A POSIX shell script printing ``key=value`` lines about the machine it runs on."""
    p = shlex.quote(machine.project)
    lines = [
        'echo "root=$(id -u)"', 'echo "cores=$(nproc)"', 'echo "kernel=$(uname -r)"',
        'echo "mininet=$(command -v mn >/dev/null && mn --version 2>&1 | head -1)"',
        f'if [ -d {p} ]; then echo "project=$(git -C {p} rev-parse --short HEAD 2>/dev/null || echo present)"; '
        'else echo "project="; fi',
        f'echo "venv=$(cd {p} && {shlex.quote(machine.python)} -c "import controller, pybmv2, workloads; print(1)" '
        '2>/dev/null)"',
        'echo "bmv2=$(simple_switch_grpc --version 2>/dev/null | head -1)"',
        f'echo "pipelines=$(sha256sum {p}/p4src/build/manifest.json 2>/dev/null | cut -c1-12)"',
    ]
    probe = ("ip link add mlfcheck0 type vxlan id 1 dstport 4789" if tunnel == "vxlan"
             else "ip link add mlfcheck0 type gretap local 127.0.0.1 remote 127.0.0.2 key 1")
    lines.append(f'if {probe} 2>/dev/null; then ip link del mlfcheck0; echo "tunnel=1"; else echo "tunnel="; fi')
    for addr in others:
        lines.append(f'd=$(ip -o route get {addr} 2>/dev/null | sed -n "s/.* dev \\([^ ]*\\).*/\\1/p"); '
                     f'echo "mtu {addr}=$d:$(cat /sys/class/net/$d/mtu 2>/dev/null)"')
    return "\n".join(lines) + "\n"


def parse_probe(text: str) -> dict[str, str]:
    """The probe's ``key=value`` lines.

    >>> parse_probe("root=0\\ncores=2\\nbmv2=\\nnoise\\n")
    {'root': '0', 'cores': '2', 'bmv2': ''}
    """
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class MachineCheck:
    """One machine's answers and what is wrong (``problems``; empty: ready)."""

    machine: str
    facts: Mapping[str, str]
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def judge_machine(machine: Machine, facts: Mapping[str, str], *, pipelines_here: str, tunnel: str,
                  link_mtu: int = JUMBO_MTU, ssh_error: str = "") -> MachineCheck:
    """What is missing on ``machine`` for a fabric, from its probe's facts.

    >>> from controller.cluster.machines import Machine
    >>> m = Machine("m0", "root", "10.0.0.1", 2, "10.0.0.1", "/p")
    >>> facts = {"root": "0", "cores": "2", "mininet": "2.3.0", "project": "abc", "venv": "1", "bmv2": "",
    ...          "pipelines": "123", "tunnel": "1", "mtu 10.0.0.2": "eth0:1500"}
    >>> c = judge_machine(m, facts, pipelines_here="123", tunnel="vxlan")
    >>> c.problems
    ('its tunnels to 10.0.0.2 leave through eth0, MTU 1500: 9,000-byte frames in VXLAN need 9050',)
    >>> c.notes
    ('no simple_switch_grpc: the Python target only',)
    """
    if ssh_error:
        return MachineCheck(machine.name, facts, (f"SSH to {machine.ssh_target} failed: {ssh_error}",))
    problems, notes = [], []
    if facts.get("root") != "0":
        problems.append("not root there (the emulation needs root; give a root login or passwordless sudo)")
    if not facts.get("mininet"):
        problems.append("no Mininet (apt-get install mininet)")
    if not facts.get("project"):
        problems.append(f"no project checkout at {machine.project} (the machines file's project)")
    elif facts.get("venv") != "1":
        problems.append(f"the project at {machine.project} is not set up (run make setup there)")
    if facts.get("project") and facts.get("pipelines") != pipelines_here:
        problems.append(f"its compiled pipelines (manifest {facts.get('pipelines') or 'missing'}) differ from "
                        f"this checkout's ({pipelines_here}): check out the same commit")
    if facts.get("tunnel") != "1":
        problems.append(f"its kernel cannot make {tunnel.upper()} tunnels (the machines file's tunnel)")
    if not facts.get("bmv2"):
        notes.append("no simple_switch_grpc: the Python target only")
    cores = facts.get("cores", "")
    if cores.isdigit() and int(cores) < machine.cores:
        notes.append(f"has {cores} cores, the file says {machine.cores}")
    need = link_mtu + OVERHEAD[tunnel]
    for key, value in facts.items():
        if key.startswith("mtu "):
            dev, _, mtu = value.partition(":")
            if not mtu.isdigit():
                problems.append(f"no route to {key[4:]} (another machine's tunnel address)")
            elif int(mtu) < need:
                problems.append(f"its tunnels to {key[4:]} leave through {dev}, MTU {mtu}: {link_mtu:,}-byte frames "
                                f"in {tunnel.upper()} need {need}")
    return MachineCheck(machine.name, facts, tuple(problems), tuple(notes))


def _pipelines_here() -> str:
    manifest = Path(__file__).resolve().parents[2] / "p4src" / "build" / "manifest.json"
    try:
        return hashlib.sha256(manifest.read_bytes()).hexdigest()[:12]
    except OSError:
        return "missing"


def check_machines(machines: Machines, *, link_mtu: int = JUMBO_MTU) -> list[MachineCheck]:
    """Probe every machine over SSH at once and judge each."""
    here = _pipelines_here()

    def one(m: Machine) -> MachineCheck:
        others = [x.tunnel_address for x in machines.machines if x.name != m.name]
        argv = ssh_argv(m, machines, ["sh", "-c", probe_script(m, others, machines.tunnel)], quiet=False)
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return judge_machine(m, {}, pipelines_here=here, tunnel=machines.tunnel,
                                 ssh_error=f"no answer in {PROBE_TIMEOUT_S:g} s")
        if out.returncode == 255:  # ssh's own failure
            why = [line for line in out.stderr.splitlines() if line.strip()]
            return judge_machine(m, {}, pipelines_here=here, tunnel=machines.tunnel,
                                 ssh_error=why[-1].strip() if why else "exit 255 (ssh -v says why)")
        return judge_machine(m, parse_probe(out.stdout), pipelines_here=here, tunnel=machines.tunnel,
                             link_mtu=link_mtu)

    with ThreadPoolExecutor(max_workers=min(16, len(machines.machines))) as pool:
        return list(pool.map(one, machines.machines))
