"""``mlfabric doctor``: what this machine can run, and which target tests will use."""

from __future__ import annotations

import importlib
import os
import subprocess
from dataclasses import asdict, dataclass, field

from controller.p4build import PROGRAM_DIRS, pipeline_files, stale_sources
from controller.toolchain import Tool, find_tool

__all__ = ["QDISCS", "Report", "collect", "probe_qdisc", "render"]

QDISCS = ("htb", "tbf", "netem")


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(slots=True)
class Report:
    checks: list[Check] = field(default_factory=list)
    qdiscs: dict[str, bool | None] = field(default_factory=dict)
    target: str = "python"
    target_reason: str = ""

    @property
    def python_target_usable(self) -> bool:
        needed = {"python target", "grpc + p4runtime", "compiled pipelines"}
        return all(c.ok for c in self.checks if c.name in needed)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["python_target_usable"] = self.python_target_usable
        return d


def probe_qdisc(kind: str) -> bool | None:
    """Whether the kernel accepts qdisc ``kind`` on a veth; None when we cannot tell (not root)."""
    if os.geteuid() != 0:
        return None
    name = f"mlfq{os.getpid() % 100000}"
    add = subprocess.run(
        ["ip", "link", "add", name, "type", "veth", "peer", "name", name + "p"],
        capture_output=True, check=False,
    )
    if add.returncode != 0:
        return None
    try:
        args = {
            "htb": ["htb", "default", "1"],
            "tbf": ["tbf", "rate", "10mbit", "burst", "32kbit", "latency", "50ms"],
            "netem": ["netem", "delay", "1ms"],
        }[kind]
        proc = subprocess.run(
            ["tc", "qdisc", "add", "dev", name, "root", *args], capture_output=True, check=False
        )
        return proc.returncode == 0
    finally:
        subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)


def _tool_check(tool: Tool, label: str) -> Check:
    if tool.present:
        return Check(label, True, f"{tool.path} ({tool.version or 'version unknown'})")
    return Check(label, False, "not installed (not in the package registries; build from source)")


def _mininet_check() -> Check:
    try:
        net = importlib.import_module("mininet.net")
    except ImportError as exc:
        return Check("mininet", False, f"python module not importable ({exc}); apt-get install mininet")
    return Check("mininet", True, f"{net.__file__} (Mininet {getattr(net, 'VERSION', '?')})")


def _python_target_check() -> list[Check]:
    checks = []
    try:
        importlib.import_module("grpc")
        importlib.import_module("p4.v1.p4runtime_pb2")
        checks.append(Check("grpc + p4runtime", True, "importable"))
    except ImportError as exc:
        checks.append(Check("grpc + p4runtime", False, str(exc)))
    stale = [s for d in PROGRAM_DIRS for s in stale_sources(d)]
    checks.append(
        Check("compiled pipelines", not stale, "up to date" if not stale else "; ".join(map(str, stale)))
    )
    try:
        from pybmv2.program import Program

        art = pipeline_files("rail_switch")
        Program.from_file(art.json)
        checks.append(Check("python target", True, f"loads {art.json.name}"))
    except Exception as exc:  # report any failure to load as a failed check
        checks.append(Check("python target", False, str(exc)))
    checks.append(_native_engine_check())
    return checks


def _native_engine_check() -> Check:
    """Whether ``--engine auto`` can take the native engine here (a C compiler)."""
    from pybmv2.native.build import cache_dir, compiler

    cc = compiler()
    if cc is None:
        return Check("native engine", False, "no C compiler (apt-get install gcc libc6-dev, or "
                                             "set CC): the Python engine runs every program")
    return Check("native engine", True, f"{cc}; builds cached in {cache_dir()}")


def _thrift_check(bmv2: Tool) -> Check:
    """Whether simple_switch_CLI can reach a fabric's simple_switch_grpc (``mlfabric bmv2-cli``)."""
    from controller.bmv2_thrift import simple_switch_cli, thrift_support
    from controller.errors import ToolchainMissing

    if not bmv2.present:
        return Check("bmv2 thrift", False, "simple_switch_grpc is not installed")
    served, reason = thrift_support(bmv2.path)
    try:
        cli = simple_switch_cli(9090).argv[1]
    except ToolchainMissing as exc:
        return Check("bmv2 thrift", False, f"{exc}" + ("" if served else f"; and {reason}"))
    return Check("bmv2 thrift", served, f"{cli} runs (mlfabric bmv2-cli)" + ("" if served else f", but {reason}"))


def collect() -> Report:
    report = Report()
    p4c = find_tool("p4c-bm2-ss")
    bmv2 = find_tool("simple_switch_grpc")
    report.checks.append(_tool_check(p4c, "p4c"))
    report.checks.append(_tool_check(bmv2, "simple_switch_grpc"))
    report.checks.append(_thrift_check(bmv2))
    report.checks.append(_mininet_check())
    for name, flag in (("iperf3", "--version"), ("tcpdump", "-h"), ("nft", "--version")):
        report.checks.append(_tool_check(find_tool(name, flag), name))
    report.checks.extend(_python_target_check())
    report.qdiscs = {q: probe_qdisc(q) for q in QDISCS}
    wanted = os.environ.get("MLFABRIC_TARGET", "python")
    if wanted == "bmv2" and not bmv2.present:
        report.target, report.target_reason = "python", "MLFABRIC_TARGET=bmv2 but simple_switch_grpc is missing: bmv2 tests skip"
    else:
        report.target = wanted
        report.target_reason = "MLFABRIC_TARGET" if "MLFABRIC_TARGET" in os.environ else "default"
    return report


def render(report: Report) -> str:
    lines = ["mlfabric doctor", ""]
    width = max(len(c.name) for c in report.checks)
    for c in report.checks:
        lines.append(f"  {'ok ' if c.ok else 'no '} {c.name:<{width}}  {c.detail}")
    lines.append("")
    q = ", ".join(
        f"{k}: {'yes' if v else 'no' if v is False else 'unknown (needs root)'}"
        for k, v in report.qdiscs.items()
    )
    lines.append(f"  qdiscs       {q}")
    lines.append(f"  target       {report.target} ({report.target_reason})")
    usable = "yes" if report.python_target_usable else "NO"
    lines.append(f"  python target path usable: {usable}")
    return "\n".join(lines)
