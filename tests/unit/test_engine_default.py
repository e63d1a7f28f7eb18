"""``$MLFABRIC_ENGINE``: the engine of a switch process started without ``--engine``."""

from __future__ import annotations

import pytest

from pybmv2.cli import _options, build_parser
from pybmv2.errors import TargetError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("env", "argv", "engine"), [
    (None, [], "auto"), ("python", [], "python"), ("native", [], "native"),
    ("python", ["--engine", "native"], "native"),  # the option wins over the environment
])
def test_the_environment_sets_the_default_engine(monkeypatch: pytest.MonkeyPatch, env: str | None,
                                                 argv: list[str], engine: str) -> None:
    if env is None:
        monkeypatch.delenv("MLFABRIC_ENGINE", raising=False)
    else:
        monkeypatch.setenv("MLFABRIC_ENGINE", env)
    assert _options(build_parser().parse_args(["--no-p4", *argv])).engine == engine


def test_a_misspelt_engine_in_the_environment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFABRIC_ENGINE", "natve")
    with pytest.raises(TargetError, match="MLFABRIC_ENGINE='natve'"):
        _options(build_parser().parse_args(["--no-p4"]))


@pytest.mark.parametrize(("argv", "value"), [([], 0), (["--busy-poll-us", "200"], 200)])
def test_busy_polling_is_off_unless_asked(argv: list[str], value: int) -> None:
    assert _options(build_parser().parse_args(["--no-p4", *argv])).busy_poll_us == value


def test_a_negative_busy_polling_window_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--no-p4", "--busy-poll-us", "-5"])
    assert "--busy-poll-us: '-5': must be >= 0" in capsys.readouterr().err
