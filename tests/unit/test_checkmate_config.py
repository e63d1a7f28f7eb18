"""The Checkmate experiment's command line takes its defaults from its configuration: a
default changed in one place is the one a run without options gets (the model size once
differed: the configuration said 1,024 hidden units, the parser 256)."""

from __future__ import annotations

import dataclasses

from controller.emulation import load_emulation_module
from controller.experiments.checkmate import CheckmateConfig

#: option (dest) -> configuration field, where the names differ
RENAMED = {"checkpoint_every": "checkpoint_ks"}


def test_every_option_defaults_to_the_configurations_default() -> None:
    parsed = vars(load_emulation_module("checkmate_experiment").build_parser().parse_args([]))
    config = CheckmateConfig()
    fields = {f.name for f in dataclasses.fields(config)}
    compared = 0
    for dest, value in parsed.items():
        name = RENAMED.get(dest, dest)
        if name in fields and value is not None:
            want = getattr(config, name)
            assert (tuple(value) if isinstance(value, list) else value) == want, (dest, value, want)
            compared += 1
    assert compared >= 12
