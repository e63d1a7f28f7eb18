"""Training jobs with a parallelization strategy, as TopoOpt co-optimizes them (pure).

A job file (YAML), loaded strictly like a topology; sizes in MB (10^6 bytes) per iteration::

    name: dlrm-16
    model: dlrm            # data-parallel dense layers + model-parallel embedding tables
    servers: 16
    compute_ms: 300        # per iteration on every server
    dense_mb: 0.6          # the dense layers' gradient: all-reduced over every server
    tables: 8              # embedding tables, each held whole by one server
    lookup_mb: 0.03        # per table and peer: activations out, their gradients back
    strategy:              # optional: where the strategy search starts
      tables: [0, 2, 4, 6, 8, 10, 12, 14]    # the server of each table

    name: transformer-16
    model: transformer     # pipeline stages (model-parallel) x replicas (data-parallel)
    servers: 16
    compute_ms: 300
    params_mb: 2.4         # the whole model's gradient; stage k's replicas all-reduce 1/stages of it
    activation_mb: 0.05    # activations of one server's share of the batch at a stage boundary;
                           # a replica of S stages carries S shares: S x this each way per boundary
    micro_batches: 8       # the pipeline's bubble: compute takes (M + S - 1) / M of compute_ms
    strategy:
      stages: 4            # pipeline depth; servers / stages replicas
      placement: [0, 1, 2, ...]   # server of (replica r, stage k) at index r * stages + k

Unknown keys and wrong values raise :class:`~controller.errors.ConfigError` naming the file,
the key and the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.errors import ConfigError
from mlfabric_base.numbers import number_problem

__all__ = ["MODELS", "Job", "Strategy", "job_to_dict", "load_job", "parse_job"]

MODELS = ("dlrm", "transformer")
_COMMON = {"name", "model", "servers", "compute_ms", "strategy"}
_KEYS = {"dlrm": _COMMON | {"dense_mb", "tables", "lookup_mb"},
         "transformer": _COMMON | {"params_mb", "activation_mb", "micro_batches"}}
_STRATEGY_KEYS = {"dlrm": {"tables"}, "transformer": {"stages", "placement"}}


@dataclass(frozen=True, slots=True, kw_only=True)
class Strategy:
    """Which servers hold which shards.

    ``tables[t]``: the server of embedding table ``t`` (dlrm). ``stages`` and
    ``placement[r * stages + k]``: the server of stage ``k`` of replica ``r`` (transformer).
    """

    tables: tuple[int, ...] = ()
    stages: int = 1
    placement: tuple[int, ...] = ()

    def describe(self) -> str:
        if self.tables:
            return f"tables on servers {list(self.tables)}"
        reps = len(self.placement) // self.stages
        chains = [self.placement[r * self.stages:(r + 1) * self.stages] for r in range(reps)]
        return f"{self.stages} stages x {reps} replicas, pipelines {[list(c) for c in chains]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A training job and the strategy its search starts from."""

    name: str
    model: str
    servers: int
    compute_ms: float
    strategy: Strategy
    dense_mb: float = 0.0
    tables: int = 0
    lookup_mb: float = 0.0
    params_mb: float = 0.0
    activation_mb: float = 0.0
    micro_batches: int = 8
    source: str = "<job>"

    def check(self, strategy: Strategy) -> Strategy:
        """``strategy`` if it fits this job, else ConfigError naming what does not."""
        bad = _bad(self.source)
        n = self.servers
        if self.model == "dlrm":
            if len(strategy.tables) != self.tables:
                raise bad("strategy.tables", list(strategy.tables), f"one server per table ({self.tables})")
            for t, s in enumerate(strategy.tables):
                if not 0 <= s < n:
                    raise bad(f"strategy.tables[{t}]", s, f"a server index 0..{n - 1}")
        else:
            if strategy.stages < 1 or n % strategy.stages:
                raise bad("strategy.stages", strategy.stages, f"must divide the {n} servers")
            if sorted(strategy.placement) != list(range(n)):
                raise bad("strategy.placement", list(strategy.placement), f"a permutation of the servers 0..{n - 1}")
        return strategy


def _bad(source: str):
    return lambda key, value, problem: ConfigError(source, key, value, problem)


#: the largest quantity (MB, ms, a count) a job file may give: far beyond any model, and far
#: from where a float's arithmetic overflows
MAX_QUANTITY = 1e12


def _number(obj: Mapping[str, Any], key: str, source: str, *, integer: bool = False, minimum: float = 0.0,
            default: Any = None) -> Any:
    value = obj.get(key, default)
    if value is None:
        raise ConfigError(source, key, None, "is required")
    if number_problem(value, minimum=minimum, integer=integer) is not None:
        kind = "an integer" if integer else "a finite number"
        raise ConfigError(source, key, value, f"must be {kind} >= {minimum:g}")
    if value > MAX_QUANTITY:
        raise ConfigError(source, key, value, f"must be <= {MAX_QUANTITY:g}")
    return value


def _ints(value: Any, key: str, source: str) -> tuple[int, ...]:
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise ConfigError(source, key, value, "must be a list of server indices")
    return tuple(value)


def parse_job(obj: Any, source: str = "<job>") -> Job:
    """A :class:`Job` from a decoded job file, checked."""
    if not isinstance(obj, Mapping):
        raise ConfigError(source, "job", obj, "must be a mapping")
    model = obj.get("model")
    if model not in MODELS:
        raise ConfigError(source, "model", model, f"one of {', '.join(MODELS)}")
    extra = sorted(set(obj) - _KEYS[model])
    if extra:
        raise ConfigError(source, extra[0], None, f"unknown key for a {model} job (known: {', '.join(sorted(_KEYS[model]))})")
    name = obj.get("name", Path(source).stem)
    if not isinstance(name, str) or not name:
        raise ConfigError(source, "name", name, "must be a non-empty string")
    n = _number(obj, "servers", source, integer=True, minimum=3)
    compute = float(_number(obj, "compute_ms", source, default=0.0))
    raw = obj.get("strategy", {}) or {}
    if not isinstance(raw, Mapping):
        raise ConfigError(source, "strategy", raw, "must be a mapping")
    extra = sorted(set(raw) - _STRATEGY_KEYS[model])
    if extra:
        raise ConfigError(source, f"strategy.{extra[0]}", None,
                          f"unknown key for a {model} strategy (known: {', '.join(sorted(_STRATEGY_KEYS[model]))})")
    if model == "dlrm":
        tables = _number(obj, "tables", source, integer=True, minimum=1)
        placed = _ints(raw["tables"], "strategy.tables", source) if "tables" in raw else \
            tuple(t * n // tables % n for t in range(tables))
        job = Job(name=name, model=model, servers=n, compute_ms=compute, source=source,
                  dense_mb=float(_number(obj, "dense_mb", source)), tables=tables,
                  lookup_mb=float(_number(obj, "lookup_mb", source)), strategy=Strategy(tables=placed))
    else:
        stages = _number(raw, "stages", f"{source}: strategy", integer=True, minimum=1, default=1)
        placement = _ints(raw["placement"], "strategy.placement", source) if "placement" in raw else tuple(range(n))
        job = Job(name=name, model=model, servers=n, compute_ms=compute, source=source,
                  params_mb=float(_number(obj, "params_mb", source)),
                  activation_mb=float(_number(obj, "activation_mb", source)),
                  micro_batches=_number(obj, "micro_batches", source, integer=True, minimum=1, default=8),
                  strategy=Strategy(stages=stages, placement=placement))
    job.check(job.strategy)
    return job


def load_job(path: str | Path) -> Job:
    """The job of a YAML job file."""
    from controller.yamlfile import read_yaml

    return parse_job(read_yaml(path), str(path))


def job_to_dict(job: Job, strategy: Strategy | None = None) -> dict[str, Any]:
    """The job as its file would say it (with ``strategy`` instead of its own, if given)."""
    s = strategy or job.strategy
    out: dict[str, Any] = {"name": job.name, "model": job.model, "servers": job.servers, "compute_ms": job.compute_ms}
    if job.model == "dlrm":
        out |= {"dense_mb": job.dense_mb, "tables": job.tables, "lookup_mb": job.lookup_mb,
                "strategy": {"tables": list(s.tables)}}
    else:
        out |= {"params_mb": job.params_mb, "activation_mb": job.activation_mb, "micro_batches": job.micro_batches,
                "strategy": {"stages": s.stages, "placement": list(s.placement)}}
    return out
