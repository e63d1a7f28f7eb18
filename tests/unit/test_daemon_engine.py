"""Which engine a switch process runs: ``--engine`` and the options only Python implements."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pybmv2.daemon import DaemonOptions, _engine_mode
from pybmv2.errors import TargetError


@pytest.mark.parametrize("engine", ["auto", "native", "python"])
def test_plain_options_keep_the_engine_asked_for(engine: str) -> None:
    assert _engine_mode(DaemonOptions(engine=engine)) == engine


@pytest.mark.parametrize("options", [
    DaemonOptions(log_console=True), DaemonOptions(pcap_dir=Path("p")),
], ids=["log-console", "pcap"])
def test_auto_falls_back_to_python_and_says_why(options: DaemonOptions,
                                                caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pybmv2.daemon"):
        assert _engine_mode(options) == "python"
    assert "need it" in caplog.text


@pytest.mark.parametrize("engine", ["auto", "native"])
@pytest.mark.parametrize("extension", [
    {"calendar_field": "release_us"}, {"port_delays": {1: 10}}, {"port_ingress_delays": {2: 10}},
], ids=["calendar", "port-delay", "ingress-delay"])
def test_the_holding_extensions_run_on_the_native_engine(engine: str, extension: dict) -> None:
    """Calendar queues and port delays are the native engine's too (its I/O thread)."""
    assert _engine_mode(DaemonOptions(engine=engine, **extension)) == engine


def test_native_refuses_them_in_one_line() -> None:
    with pytest.raises(TargetError, match=r"--pcap need the Python engine"):
        _engine_mode(DaemonOptions(engine="native", pcap_dir=Path("p")))


def test_unknown_engine_is_named() -> None:
    with pytest.raises(TargetError, match="'fast'"):
        _engine_mode(DaemonOptions(engine="fast"))
