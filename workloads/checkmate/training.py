"""The configuration of a Checkmate training job, shared by its workers and its shadow.

Workers get it in every ``ckpt_train`` command (:mod:`workloads.protocol`); the shadow reads
it from its own file. Both must agree on every field that shapes the bytes of the gradient
and the optimizer step, so that the shadow's replica stays bit-identical.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workloads.checkmate.model import ModelSpec
from workloads.checkmate.optim import OptimizerSpec
from workloads.checkmate.tagging import MAX_SESSION
from workloads.errors import ConfigError
from workloads.plan import RING_KINDS

__all__ = ["CHECKPOINT_MODES", "CIDS_PER_ITERATION", "TrainingConfig"]

#: collective ids one iteration uses (barrier, reduce-scatter, all-gather; the rest spare):
#: iteration ``i`` tags its frames with ids ``i * CIDS_PER_ITERATION + 1 ...``
CIDS_PER_ITERATION = 8

_KEYS = {"model", "optimizer", "ring", "mirror", "session", "mirror_port", "state_port",
         "checkpoint_every", "checkpoint_dir", "checkpoint_mode", "restore", "compute_s"}
#: how the baseline checkpoints: ``sync`` (training waits for the write), ``checkfreq``
#: (snapshot in memory, persist in the background, one in flight: CheckFreq's two phases) or
#: ``gemini`` (snapshot in memory, sent to a peer's memory in chunks during the compute
#: phase's network idle time: :mod:`workloads.checkmate.gemini`)
CHECKPOINT_MODES = ("sync", "checkfreq", "gemini")


def _int(source: str, key: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(source, key, value, f"must be an integer in {lo}..{hi}")
    return value


def _mode(source: str, value: Any) -> str:
    if value not in CHECKPOINT_MODES:
        raise ConfigError(source, "checkpoint_mode", value, f"one of {', '.join(CHECKPOINT_MODES)}")
    return str(value)


@dataclass(frozen=True, kw_only=True)
class TrainingConfig:
    """One data-parallel job.

    ``mirror``: the all-gather's mirrored sends go over their own connections, tagged with
    ``session`` (:mod:`workloads.checkmate.tagging`); rank ``r`` accepts them on
    ``mirror_port + r``. ``state_port``: rank 0 serves its state there (the shadow's side
    channel; 0: none). ``checkpoint_every``: the baseline, rank 0 writes a synchronous
    checkpoint to ``checkpoint_dir`` every k iterations (0: never), or with ``checkpoint_mode``
    ``checkfreq`` snapshots it and persists it in the background, or with ``gemini`` sends it
    to a peer's store (``checkpoint_dir`` its URL) in the compute phases' idle time. ``restore``: start from
    this checkpoint. ``compute_s``: emulated accelerator time per iteration.

    >>> cfg = TrainingConfig.from_dict({"mirror_port": 7100, "optimizer": {"kind": "adam"}})
    >>> cfg.optimizer.kind, cfg.mirror, TrainingConfig.from_dict(cfg.to_dict()) == cfg
    ('adam', True, True)
    """

    model: ModelSpec = field(default_factory=ModelSpec)
    optimizer: OptimizerSpec = field(default_factory=OptimizerSpec)
    ring: str = "pxn"
    mirror: bool = True
    session: int = 0
    mirror_port: int = 0
    state_port: int = 0
    checkpoint_every: int = 0
    checkpoint_dir: str = ""
    checkpoint_mode: str = "sync"
    restore: str = ""
    compute_s: float = 0.0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<training>") -> TrainingConfig:
        if not isinstance(data, Mapping):
            raise ConfigError(source, "<top>", data, "must be an object")
        for key in data:
            if key not in _KEYS:
                raise ConfigError(source, key, data[key], f"unknown key (allowed: {', '.join(sorted(_KEYS))})")
        model = data.get("model", {})
        if not isinstance(model, Mapping) or set(model) - {"hidden", "seed", "batch"}:
            raise ConfigError(source, "model", model, "must be an object with hidden, seed, batch")
        ring = data.get("ring", "pxn")
        if ring not in RING_KINDS:
            raise ConfigError(source, "ring", ring, f"must be one of {', '.join(RING_KINDS)}")
        mirror = data.get("mirror", True)
        if not isinstance(mirror, bool):
            raise ConfigError(source, "mirror", mirror, "must be true or false")
        compute = data.get("compute_s", 0.0)
        if isinstance(compute, bool) or not isinstance(compute, int | float) or compute < 0:
            raise ConfigError(source, "compute_s", compute, "must be a number of seconds >= 0")
        for key in ("checkpoint_dir", "restore"):
            if not isinstance(data.get(key, ""), str):
                raise ConfigError(source, key, data[key], "must be a path string or an http:// checkpoint store URL")
        cfg = cls(model=ModelSpec(**{k: _int(source, f"model.{k}", v, 0, 1 << 30) for k, v in model.items()}),
                  optimizer=OptimizerSpec.from_dict(data.get("optimizer", {}), source),
                  ring=ring, mirror=mirror,
                  session=_int(source, "session", data.get("session", 0), 0, MAX_SESSION),
                  mirror_port=_int(source, "mirror_port", data.get("mirror_port", 0), 0, 65535),
                  state_port=_int(source, "state_port", data.get("state_port", 0), 0, 65535),
                  checkpoint_every=_int(source, "checkpoint_every", data.get("checkpoint_every", 0), 0, 1 << 20),
                  checkpoint_dir=data.get("checkpoint_dir", ""), restore=data.get("restore", ""),
                  checkpoint_mode=_mode(source, data.get("checkpoint_mode", "sync")),
                  compute_s=float(compute))
        if cfg.mirror and not cfg.mirror_port:
            raise ConfigError(source, "mirror_port", cfg.mirror_port, "mirroring needs the mirrored legs' port")
        if cfg.checkpoint_every and not cfg.checkpoint_dir:
            raise ConfigError(source, "checkpoint_dir", "", "checkpoint_every needs a checkpoint_dir")
        if cfg.checkpoint_every and cfg.checkpoint_mode == "gemini" and not cfg.checkpoint_dir.startswith("http://"):
            raise ConfigError(source, "checkpoint_dir", cfg.checkpoint_dir,
                              "gemini checkpoints to a peer's store: an http:// URL")
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return {"model": {"hidden": self.model.hidden, "seed": self.model.seed, "batch": self.model.batch},
                "optimizer": self.optimizer.to_dict(), "ring": self.ring, "mirror": self.mirror,
                "session": self.session, "mirror_port": self.mirror_port, "state_port": self.state_port,
                "checkpoint_every": self.checkpoint_every, "checkpoint_dir": self.checkpoint_dir,
                "checkpoint_mode": self.checkpoint_mode,
                "restore": self.restore, "compute_s": self.compute_s}

    def replica_fields(self) -> tuple[Any, ...]:
        """What must not change between iterations of one trainer (what shapes the replica)."""
        return (self.model, self.optimizer, self.ring, self.mirror, self.session, self.mirror_port,
                self.state_port)
