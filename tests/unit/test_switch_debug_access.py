"""The pure side of looking into a fabric's switches: switch command lines with logs, pcaps
and Thrift ports, Thrift port assignment, finding simple_switch_CLI and what it needs, the
published access record, and the one-line errors of ``mlfabric shell`` and ``bmv2-cli``."""

from __future__ import annotations

import dataclasses
import importlib.abc
import socket
import sys
from pathlib import Path

import pytest

from controller.bmv2_thrift import assign_thrift_ports, port_free, simple_switch_cli, thrift_support
from controller.cli import main
from controller.cli.debug_cmds import require_module
from controller.errors import EmulationError, ToolchainMissing
from controller.live_fabric import PARAM, FabricAccess
from controller.switch_process import SwitchSpec, switch_command
from controller.topology import dump_topology, load_topology, rail_only


def _one_line(capsys, argv: list[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mlfabric: error: ") and "Traceback" not in err, err
    return err


@pytest.fixture
def fake_bmv2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``simple_switch_grpc`` on PATH that is a plain file (built without Thrift)."""
    exe = tmp_path / "bin" / "simple_switch_grpc"
    exe.parent.mkdir()
    exe.write_bytes(b"\x7fELF ... compiled without Thrift support ...")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{exe.parent}:/usr/bin:/bin")
    return exe


def test_bmv2_logs_to_its_console_at_the_level_and_gets_its_thrift_port(fake_bmv2: Path) -> None:
    spec = SwitchSpec(name="rail0", target="bmv2", ports={1: "rail0-eth1"}, log_dir=Path("run/logs"),
                      pcap_dir=Path("run/pcaps"), thrift_port=9091)
    cmd = switch_command(spec)
    assert cmd[:8] == [str(fake_bmv2), "--no-p4", "--log-console", "-L", "info", "--thrift-port", "9091", "-i"]
    assert cmd[cmd.index("--pcap") + 1] == "run/pcaps" and cmd.index("--pcap") < cmd.index("--")
    assert "--log-file" not in cmd, "one log per switch: its console, redirected to logs/rail0.log"
    quiet = switch_command(dataclasses.replace(spec, log_dir=None, thrift_port=None))
    assert "--log-console" not in quiet and "--thrift-port" not in quiet


def test_the_python_target_gets_the_level_and_no_thrift_port() -> None:
    spec = SwitchSpec(name="rail0", ports={}, log_dir=Path("logs"), log_level="debug", thrift_port=9090)
    cmd = switch_command(spec)
    assert cmd[cmd.index("-L") + 1] == "debug" and "--thrift-port" not in cmd
    with pytest.raises(EmulationError, match="unknown log level 'loud'"):
        switch_command(dataclasses.replace(spec, log_level="loud"))


def test_python_target_levels_trace_packets_as_bmv2_logs_them() -> None:
    from pybmv2.cli import _options, build_parser

    def traced(*argv: str) -> bool:
        return _options(build_parser().parse_args(["--no-p4", *argv])).log_console

    assert [traced(), traced("-L", "info"), traced("-L", "debug"), traced("-L", "trace"), traced("--log-console"),
            traced("--log-console", "-L", "warn")] == [False, False, True, True, True, False]


def test_thrift_ports_are_distinct_and_skip_busy_ones() -> None:
    with socket.socket() as busy:
        busy.bind(("", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert not port_free(port)
        got = assign_thrift_ports(["rail0", "rail1"], base=port)
    assert port not in got.values() and len(set(got.values())) == 2 and min(got.values()) > port
    assert assign_thrift_ports(["a", "b", "c"], is_free=lambda p: p % 2 == 0) == {"a": 9090, "b": 9092, "c": 9094}
    with pytest.raises(EmulationError, match="no free TCP port from 65535 up for switch b"):
        assign_thrift_ports(["a", "b"], base=65535, is_free=lambda p: True)


def test_thrift_support_is_read_from_the_binary(tmp_path: Path) -> None:
    with_thrift = tmp_path / "with"
    with_thrift.write_bytes(b"\x00_ZN15sswitch_runtime11get_handlerEP12SimpleSwitch\x00")
    without = tmp_path / "without"
    without.write_bytes(b"\x00compiled without Thrift support\x00")
    assert thrift_support(with_thrift) == (True, "")
    served, reason = thrift_support(without)
    assert not served and "built without Thrift" in reason and "--with-thrift" in reason and "mlfabric shell" in reason
    assert thrift_support(tmp_path / "absent")[0] is False


def test_simple_switch_cli_runs_with_this_interpreter_and_bmv2_modules(tmp_path: Path) -> None:
    modules = tmp_path / "lib" / "python3.11" / "site-packages"
    modules.mkdir(parents=True)
    (modules / "sswitch_CLI.py").write_text("")
    script = tmp_path / "bin" / "simple_switch_CLI"
    script.parent.mkdir()
    script.write_text(f'import sys\nsys.path.append("{modules}")\nimport sswitch_CLI\n')
    cmd = simple_switch_cli(9092, ["--pre", "SimplePreLAG"], script=str(script))
    assert cmd.argv == (sys.executable, str(script), "--thrift-ip", "127.0.0.1", "--thrift-port", "9092",
                        "--pre", "SimplePreLAG")
    assert cmd.env({"PYTHONPATH": "/x"})["PYTHONPATH"] == f"{modules}:/x"
    (modules / "sswitch_CLI.py").unlink()
    with pytest.raises(ToolchainMissing, match=r"BMv2's Python modules \(sswitch_CLI.py"):
        simple_switch_cli(9092, script=str(script))


class _Hide(importlib.abc.MetaPathFinder):
    """This environment, less one package (as on a machine where it is not installed)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] == self.name:
            raise ModuleNotFoundError(fullname)
        return None


def test_a_missing_tool_is_named(monkeypatch: pytest.MonkeyPatch, capsys, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "meta_path", [_Hide("p4runtime_sh"), *sys.meta_path])
    for name in [m for m in sys.modules if m.split(".")[0] == "p4runtime_sh"]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ToolchainMissing, match="p4runtime-shell is not installed"):
        require_module("p4runtime_sh", "p4runtime-shell is not installed")
    err = _one_line(capsys, ["shell", "rail0", "--topology", str(tmp_path / "unused.yaml")])
    assert "p4runtime-shell is not installed" in err and "make setup" in err


def _published(tmp_path: Path, access: FabricAccess | None, port: int = 1) -> Path:
    topo = rail_only(2, 2, rate_mbps=None)
    topo = dataclasses.replace(
        topo, switches=tuple(dataclasses.replace(s, grpc=f"127.0.0.1:{port}") for s in topo.switches),
        params={**topo.params, **({PARAM: access.to_params()} if access else {})})
    path = tmp_path / "live.yaml"
    dump_topology(topo, path)
    return path


def test_the_access_record_survives_the_published_yaml(tmp_path: Path) -> None:
    access = FabricAccess(target="bmv2", run_dir=tmp_path, log_dir=tmp_path / "logs", pcap_dir=tmp_path / "pcaps",
                          log_level="warn", thrift_ports={"rail0": 9090, "rail1": 9091}, thrift_server=False,
                          thrift_reason="built without Thrift")
    assert FabricAccess.from_params(load_topology(_published(tmp_path, access)).params) == access


def test_shell_and_bmv2_cli_errors_are_one_line(monkeypatch: pytest.MonkeyPatch, capsys, tmp_path: Path) -> None:
    monkeypatch.setenv("MLFABRIC_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("MLFABRIC_TOPOLOGY", raising=False)
    assert "no emulation is running" in _one_line(capsys, ["shell", "rail0"])
    assert "no emulation is running" in _one_line(capsys, ["bmv2-cli", "rail0"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # bound, not listening: refuses connections
        live = _published(tmp_path, FabricAccess(target="python"), port=closed)
        err = _one_line(capsys, ["shell", "spine9", "--topology", str(live)])
        assert "unknown switch 'spine9'" in err and "rail0, rail1" in err
        err = _one_line(capsys, ["shell", "rail0", "--topology", str(live)])
        assert f"rail0 at 127.0.0.1:{closed} does not answer" in err
    assert "expected HI,LO" in _one_line(capsys, ["shell", "rail0", "--election-id", "1"])
    err = _one_line(capsys, ["bmv2-cli", "spine9", "--topology", str(live)])
    assert "spine9" in err and "rail0, rail1" in err
    assert "the Python target has no Thrift server" in _one_line(capsys, ["bmv2-cli", "rail0", "--topology", str(live)])
    plain = _published(tmp_path, None)
    assert "was not published by a running fabric" in _one_line(capsys, ["bmv2-cli", "rail0", "--topology", str(plain)])
    bmv2 = _published(tmp_path, FabricAccess(target="bmv2", thrift_ports={"rail0": 9090},
                                             thrift_reason="x was built without Thrift"))
    assert "rail0: x was built without Thrift" in _one_line(capsys, ["bmv2-cli", "rail0", "--topology", str(bmv2)])


@pytest.mark.parametrize(("argv", "topology", "election", "passed"), [
    (["shell", "rail0"], None, "0,0", []),
    (["shell", "--election-id", "2,0", "rail0", "--", "-v"], None, "2,0", ["-v"]),
    (["shell", "rail0", "--topology", "t.yaml", "--", "-v"], "t.yaml", "0,0", ["-v"]),
    (["shell", "rail0", "--verbose"], None, "0,0", ["--verbose"]),
])
def test_options_after_the_switch_are_ours_and_the_rest_the_tools(argv, topology, election, passed) -> None:
    from controller.cli.debug_cmds import _own_options, _shell_options
    from controller.cli.main import build_parser

    args = build_parser().parse_args(argv)
    assert _own_options(args, _shell_options, "mlfabric shell") == passed
    assert (str(args.topology) if args.topology else None, args.election_id) == (topology, election)
