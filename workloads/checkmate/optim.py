"""The optimizer step every worker and the shadow apply to the summed gradient, bit-exactly.

:meth:`Optimizer.step` takes the all-reduced SUM of the ranks' gradients and the world size
and does every operation itself, in float32, in a fixed order, with scalars rounded to
float32 once. Workers and the shadow run this same code on the same bytes, so their
parameters stay bit-identical; the scalar path (Adam's bias corrections) uses only IEEE-754
basic operations (no ``pow`` from libm), so it does not depend on the platform either.

SGD (PyTorch semantics, dampening 0, no Nesterov), with ``g = grad_sum / world``::

    g += weight_decay * p                # when weight_decay != 0
    v = g                 (first step)   # when momentum != 0
    v = momentum * v + g  (later steps)
    p -= lr * v                          # (lr * g without momentum)

Adam (PyTorch semantics, L2 weight decay added to the gradient, no AMSGrad), ``t`` counting
from 1::

    g += weight_decay * p                # when weight_decay != 0
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * (g * g)
    step_size = f32(lr / (1 - beta1**t))            # float64 scalars, rounded once
    sqrt_bc2  = f32(sqrt(1 - beta2**t))
    p -= step_size * (m / (sqrt(v) / sqrt_bc2 + eps))

``beta**t`` is computed by exponentiation by squaring in float64.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from workloads.errors import ConfigError

__all__ = ["OPTIMIZER_KINDS", "Optimizer", "OptimizerSpec"]

#: the optimizers :class:`Optimizer` implements
OPTIMIZER_KINDS = ("sgd", "adam")

_SOURCE = "<optimizer>"
_FLOAT_KEYS = ("lr", "momentum", "beta1", "beta2", "eps", "weight_decay")
_STATE_SOURCE = "<optimizer state>"


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(_SOURCE, key, value, "must be a finite number")
    return float(value)


@dataclass(frozen=True, kw_only=True)
class OptimizerSpec:
    """Which optimizer and its hyper-parameters (``momentum``: SGD only; ``beta1``,
    ``beta2``, ``eps``: Adam only).

    >>> spec = OptimizerSpec.from_dict({"kind": "adam", "lr": 0.001})
    >>> spec.kind, spec.lr, OptimizerSpec.from_dict(spec.to_dict()) == spec
    ('adam', 0.001, True)
    >>> OptimizerSpec.from_dict({"lr": -1}, "job")
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: job: optimizer.lr: must be > 0 (got -1)
    >>> OptimizerSpec.from_dict({"nesterov": True}, "job")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: job: optimizer.nesterov: unknown key (allowed: ...) (got True)
    """

    kind: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.9
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in OPTIMIZER_KINDS:
            raise ConfigError(_SOURCE, "kind", self.kind,
                              f"must be one of {', '.join(OPTIMIZER_KINDS)}")
        values = {key: _number(key, getattr(self, key)) for key in _FLOAT_KEYS}
        # range errors report the value as given (before it becomes a float)
        if not values["lr"] > 0:
            raise ConfigError(_SOURCE, "lr", self.lr, "must be > 0")
        for key in ("momentum", "beta1", "beta2"):
            if not 0 <= values[key] < 1:
                raise ConfigError(_SOURCE, key, getattr(self, key), "must be in [0, 1)")
        if not values["eps"] > 0:
            raise ConfigError(_SOURCE, "eps", self.eps, "must be > 0")
        if values["weight_decay"] < 0:
            raise ConfigError(_SOURCE, "weight_decay", self.weight_decay, "must be >= 0")
        for key, value in values.items():
            object.__setattr__(self, key, value)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = _SOURCE) -> OptimizerSpec:
        """Read strictly: unknown keys and bad values raise ConfigError naming
        ``optimizer.<key>``."""
        if not isinstance(data, Mapping):
            raise ConfigError(source, "optimizer", data, "must be an object")
        allowed = {"kind", *_FLOAT_KEYS}
        for key in data:
            if key not in allowed:
                raise ConfigError(source, f"optimizer.{key}", data[key],
                                  f"unknown key (allowed: {', '.join(sorted(allowed))})")
        try:
            return cls(**data)
        except ConfigError as exc:
            raise ConfigError(source, f"optimizer.{exc.key}", exc.value, exc.problem) from None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _powi(base: float, n: int) -> float:
    """``base ** n`` for ``n >= 0`` by squaring: IEEE-754 multiplications only."""
    result, square = 1.0, base
    while n:
        if n & 1:
            result *= square
        square *= square
        n >>= 1
    return result


class Optimizer:
    """The optimizer state for ``size`` parameters; :meth:`step` updates them in place.

    >>> opt = Optimizer(OptimizerSpec(lr=0.5, momentum=0.0), 2)
    >>> p = np.ones(2, dtype=np.float32)
    >>> opt.step(p, np.array([2.0, -2.0], dtype=np.float32), world=2)
    >>> p.tolist(), int(opt.state()["step"])
    ([0.5, 1.5], 1)
    """

    def __init__(self, spec: OptimizerSpec, size: int) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"optimizer size {size!r} must be an integer >= 0")
        self.spec, self.size = spec, size
        self.steps = 0
        self._lr = np.float32(spec.lr)
        self._wd = np.float32(spec.weight_decay)
        self._momentum = np.float32(spec.momentum)
        self._beta1 = np.float32(spec.beta1)
        self._one_minus_beta1 = np.float32(1.0 - spec.beta1)
        self._beta2 = np.float32(spec.beta2)
        self._one_minus_beta2 = np.float32(1.0 - spec.beta2)
        self._eps = np.float32(spec.eps)
        self._arrays: dict[str, np.ndarray] = {
            name: np.zeros(size, dtype=np.float32) for name in self.state_names()}
        self._g = np.empty(size, dtype=np.float32)
        self._tmp = np.empty(size, dtype=np.float32)

    def state_names(self) -> tuple[str, ...]:
        """The state arrays of this kind (besides ``step``)."""
        return ("velocity",) if self.spec.kind == "sgd" else ("m", "v")

    def _check(self, name: str, arr: np.ndarray) -> None:
        if not isinstance(arr, np.ndarray) or arr.dtype != np.float32 or arr.shape != (self.size,):
            shape = getattr(arr, "shape", None)
            dtype = getattr(arr, "dtype", type(arr).__name__)
            raise ValueError(f"optimizer step: {name} must be float32 of shape ({self.size},), "
                             f"got {dtype} of shape {shape}")

    def step(self, params: np.ndarray, grad_sum: np.ndarray, world: int) -> None:
        """Apply one step to ``params`` (float32, in place) from the SUM of the ``world``
        ranks' gradients; ``grad_sum`` is not modified."""
        self._check("params", params)
        self._check("grad_sum", grad_sum)
        if isinstance(world, bool) or not isinstance(world, int) or world < 1:
            raise ValueError(f"optimizer step: world {world!r} must be an integer >= 1")
        g, tmp = self._g, self._tmp
        np.divide(grad_sum, np.float32(world), out=g)
        if self.spec.weight_decay != 0:
            np.multiply(params, self._wd, out=tmp)
            np.add(g, tmp, out=g)
        self.steps += 1
        if self.spec.kind == "sgd":
            self._sgd(params, g, tmp)
        else:
            self._adam(params, g, tmp)

    def _sgd(self, params: np.ndarray, g: np.ndarray, tmp: np.ndarray) -> None:
        update = g
        if self.spec.momentum != 0:
            v = self._arrays["velocity"]
            if self.steps == 1:
                np.copyto(v, g)
            else:
                np.multiply(v, self._momentum, out=v)
                np.add(v, g, out=v)
            update = v
        np.multiply(update, self._lr, out=tmp)
        np.subtract(params, tmp, out=params)

    def _adam(self, params: np.ndarray, g: np.ndarray, tmp: np.ndarray) -> None:
        m, v = self._arrays["m"], self._arrays["v"]
        spec, t = self.spec, self.steps
        step_size = np.float32(spec.lr / (1.0 - _powi(spec.beta1, t)))
        sqrt_bc2 = np.float32(math.sqrt(1.0 - _powi(spec.beta2, t)))
        np.multiply(m, self._beta1, out=m)
        np.multiply(g, self._one_minus_beta1, out=tmp)
        np.add(m, tmp, out=m)
        np.multiply(v, self._beta2, out=v)
        np.multiply(g, g, out=tmp)
        np.multiply(tmp, self._one_minus_beta2, out=tmp)
        np.add(v, tmp, out=v)
        # g is free now: it becomes the denominator
        np.sqrt(v, out=g)
        np.divide(g, sqrt_bc2, out=g)
        np.add(g, self._eps, out=g)
        np.divide(m, g, out=tmp)
        np.multiply(tmp, step_size, out=tmp)
        np.subtract(params, tmp, out=params)

    def state(self) -> dict[str, np.ndarray]:
        """Copies of the state arrays and ``step`` (the steps taken, a 0-d int64 array)."""
        out = {name: arr.copy() for name, arr in self._arrays.items()}
        out["step"] = np.array(self.steps, dtype=np.int64)
        return out

    def load_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Replace the state by ``state`` (as :meth:`state` returns it), checked first: the
        keys must be exactly this kind's, the arrays float32 of the right size."""
        expected = {*self.state_names(), "step"}
        for key in state:
            if key not in expected:
                raise ConfigError(_STATE_SOURCE, key, _describe(state[key]),
                                  f"unknown key for {self.spec.kind} (expected: "
                                  f"{', '.join(sorted(expected))})")
        for key in sorted(expected):
            if key not in state:
                raise ConfigError(_STATE_SOURCE, key, None, f"missing for {self.spec.kind}")
        step = np.asarray(state["step"])
        if step.shape != () or step.dtype.kind not in "iu" or int(step) < 0:
            raise ConfigError(_STATE_SOURCE, "step", _describe(state["step"]),
                              "must be a 0-d integer array >= 0")
        for name in self.state_names():
            arr = np.asarray(state[name])
            if arr.dtype != np.float32 or arr.shape != (self.size,):
                raise ConfigError(_STATE_SOURCE, name, _describe(arr),
                                  f"must be float32 of shape ({self.size},)")
        for name in self.state_names():
            np.copyto(self._arrays[name], state[name])
        self.steps = int(step)


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    return repr(value)
