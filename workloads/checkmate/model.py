"""The model every rank trains and the shadow mirrors: a one-hidden-layer MLP on the digits.

Pure numpy, float32 throughout. The parameters live in one flat float32 vector, laid out as
``W1 (inputs x hidden), b1 (hidden), W2 (hidden x classes), b2 (classes)``, each block
C-ordered; the gradient has the same layout, so the ring all-reduce sums one buffer.

The data is scikit-learn's ``load_digits`` (1797 8x8 images, bundled, no download), pixels
scaled to ``[0, 1]``; the first :data:`TRAIN_SIZE` samples are the training set and the last
:data:`TEST_SIZE` the test set. Iteration ``i`` draws a global batch of ``spec.batch``
training samples from an RNG seeded with ``(spec.seed, i)``; rank ``r`` of ``world`` takes
the ``r``-th of ``world`` even slices of it (``np.array_split``), so that the sum of the
ranks' gradients (:func:`loss_and_grad` divides by the *global* batch) is the gradient of
the mean loss over the global batch.

>>> spec = ModelSpec(hidden=8, batch=16)
>>> flat = init_params(spec)
>>> flat.dtype, flat.size == param_count(spec)
(dtype('float32'), True)
>>> X, y = load_dataset()
>>> idx = batch_indices(spec, 0, 1, 4)
>>> loss, grad = loss_and_grad(spec, flat, X[idx], y[idx])
>>> grad.dtype, grad.shape == flat.shape, len(idx)
(dtype('float32'), True, 4)
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workloads.errors import ConfigError

__all__ = [
    "CLASSES",
    "DIGITS_SAMPLES",
    "INPUTS",
    "TEST_SIZE",
    "TRAIN_SIZE",
    "ModelSpec",
    "accuracy",
    "batch_indices",
    "check_world",
    "init_params",
    "load_dataset",
    "loss_and_grad",
    "param_count",
    "param_digest",
    "test_set",
    "train_set",
    "unpack",
]

#: features of one sample (8 x 8 pixels)
INPUTS = 64
#: digit classes
CLASSES = 10
#: samples in scikit-learn's digits data set
DIGITS_SAMPLES = 1797
#: the last samples, held out for :func:`accuracy`
TEST_SIZE = 297
#: the first samples, the only ones :func:`batch_indices` draws
TRAIN_SIZE = DIGITS_SAMPLES - TEST_SIZE

_SOURCE = "<model>"


def _positive_int(key: str, value: object, hi: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(_SOURCE, key, value, "must be an integer >= 1")
    if hi is not None and value > hi:
        raise ConfigError(_SOURCE, key, value, f"must be <= {hi}")


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """The shape of the model and of its batches.

    ``hidden``: width of the hidden layer. ``seed``: seeds the initial parameters and the
    batches. ``batch``: the global batch of one iteration, split over the ranks.

    >>> spec = ModelSpec(hidden=32)
    >>> spec.inputs, spec.classes, spec.batch
    (64, 10, 64)
    >>> ModelSpec(hidden=0)
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: <model>: hidden: must be an integer >= 1 (got 0)
    """

    hidden: int = 64
    seed: int = 0
    batch: int = 64

    def __post_init__(self) -> None:
        _positive_int("hidden", self.hidden)
        _positive_int("batch", self.batch, TRAIN_SIZE)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(_SOURCE, "seed", self.seed, "must be an integer >= 0")

    @property
    def inputs(self) -> int:
        return INPUTS

    @property
    def classes(self) -> int:
        return CLASSES


def param_count(spec: ModelSpec) -> int:
    """Number of parameters (float32 values) of the model.

    >>> param_count(ModelSpec(hidden=64))
    4810
    """
    h = spec.hidden
    return INPUTS * h + h + h * CLASSES + CLASSES


def unpack(spec: ModelSpec,
           flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Views ``(W1, b1, W2, b2)`` into ``flat`` (writing through them writes ``flat``).

    >>> spec = ModelSpec(hidden=3)
    >>> [a.shape for a in unpack(spec, init_params(spec))]
    [(64, 3), (3,), (3, 10), (10,)]
    """
    n = param_count(spec)
    if flat.ndim != 1 or flat.size != n:
        raise ValueError(f"flat parameters: shape {flat.shape}, "
                         f"expected ({n},) for hidden={spec.hidden}")
    h = spec.hidden
    a = INPUTS * h
    b = a + h
    c = b + h * CLASSES
    return flat[:a].reshape(INPUTS, h), flat[a:b], flat[b:c].reshape(h, CLASSES), flat[c:]


def init_params(spec: ModelSpec) -> np.ndarray:
    """The initial parameters, a function of ``spec`` only: He-normal ``W1``, LeCun-normal
    ``W2`` (drawn in float64 from ``default_rng(seed)``, rounded once), zero biases.

    >>> spec = ModelSpec(hidden=4, seed=7)
    >>> bool(np.array_equal(init_params(spec), init_params(spec)))
    True
    >>> W1, b1, W2, b2 = unpack(spec, init_params(spec))
    >>> bool(b1.any() or b2.any())
    False
    """
    rng = np.random.default_rng(spec.seed)
    flat = np.zeros(param_count(spec), dtype=np.float32)
    W1, _, W2, _ = unpack(spec, flat)
    W1[...] = rng.standard_normal((INPUTS, spec.hidden)) * np.sqrt(2.0 / INPUTS)
    W2[...] = rng.standard_normal((spec.hidden, CLASSES)) * np.sqrt(1.0 / spec.hidden)
    return flat


@functools.lru_cache(maxsize=1)
def load_dataset() -> tuple[np.ndarray, np.ndarray]:
    """All of the digits: ``X`` float32 ``(1797, 64)`` in ``[0, 1]``, ``y`` int64 (read-only,
    cached). Rows ``:TRAIN_SIZE`` are the training set, the rest the test set.

    Read from the file scikit-learn's ``load_digits`` reads (its bundled ``digits.csv.gz``)
    without importing scikit-learn, whose import costs every worker a CPU-second at start."""
    import gzip
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the digits data set needs scikit-learn installed (make setup)")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
    with gzip.open(path, "rt") as f:
        flat = np.loadtxt(f, delimiter=",")
    X = np.ascontiguousarray(flat[:, :-1] / 16.0, dtype=np.float32)
    y = np.ascontiguousarray(flat[:, -1], dtype=np.int64)
    if X.shape != (DIGITS_SAMPLES, INPUTS) or y.shape != (DIGITS_SAMPLES,):
        raise RuntimeError(f"load_digits: unexpected shapes {X.shape}, {y.shape}")
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def train_set() -> tuple[np.ndarray, np.ndarray]:
    """The training samples (read-only views)."""
    X, y = load_dataset()
    return X[:TRAIN_SIZE], y[:TRAIN_SIZE]


def test_set() -> tuple[np.ndarray, np.ndarray]:
    """The held-out samples (read-only views).

    >>> X, y = test_set()
    >>> X.shape, y.shape, X.dtype
    ((297, 64), (297,), dtype('float32'))
    """
    X, y = load_dataset()
    return X[TRAIN_SIZE:], y[TRAIN_SIZE:]


# pytest's doctest collection would otherwise take test_set for a test function
test_set.__test__ = False  # type: ignore[attr-defined]


def check_world(spec: ModelSpec, world: int) -> None:
    """Raise ConfigError unless every one of ``world`` ranks gets at least one sample.

    >>> check_world(ModelSpec(batch=8), 32)
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: <model>: batch: must be >= the world size 32 (got 8)
    """
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ConfigError(_SOURCE, "world", world, "must be an integer >= 1")
    if spec.batch < world:
        raise ConfigError(_SOURCE, "batch", spec.batch, f"must be >= the world size {world}")


def batch_indices(spec: ModelSpec, iteration: int, rank: int, world: int) -> np.ndarray:
    """Rank ``rank``'s indices (into :func:`load_dataset`'s arrays) of ``iteration``'s batch.

    The global batch is ``spec.batch`` distinct training samples drawn by
    ``default_rng((seed, iteration))``; the ranks' slices partition it in order.

    >>> spec = ModelSpec(batch=10)
    >>> parts = [batch_indices(spec, 3, r, 3) for r in range(3)]
    >>> [len(p) for p in parts]
    [4, 3, 3]
    >>> bool(np.array_equal(np.concatenate(parts), batch_indices(spec, 3, 0, 1)))
    True
    """
    check_world(spec, world)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world:
        raise ValueError(f"rank {rank!r} out of range for world {world}")
    if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
        raise ValueError(f"iteration {iteration!r} must be an integer >= 0")
    rng = np.random.default_rng((spec.seed, iteration))
    chosen = rng.choice(TRAIN_SIZE, size=spec.batch, replace=False).astype(np.int64)
    return np.array_split(chosen, world)[rank]


def _check_samples(spec: ModelSpec, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[1] != INPUTS or y.shape != (X.shape[0],):
        raise ValueError(f"samples: X shape {X.shape}, y shape {y.shape}; "
                         f"expected (n, {INPUTS}) and (n,)")
    if y.size and (y.min() < 0 or y.max() >= CLASSES):
        raise ValueError(f"labels must be in 0..{CLASSES - 1}")
    return X, y.astype(np.intp, copy=False)


def _logits(spec: ModelSpec, flat: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(pre-activation of the hidden layer, logits)``, float32."""
    W1, b1, W2, b2 = unpack(spec, flat)
    pre = X @ W1
    pre += b1
    hid = np.maximum(pre, np.float32(0))
    z = hid @ W2
    z += b2
    return pre, z


def loss_and_grad(spec: ModelSpec, flat: np.ndarray, X: np.ndarray,
                  y: np.ndarray) -> tuple[float, np.ndarray]:
    """Softmax cross-entropy of the local samples and its gradient, both divided by the
    GLOBAL batch ``spec.batch``: summed over the ranks they are the mean loss of the global
    batch and its gradient.

    Returns ``(loss, grad)``; ``grad`` is a new flat float32 array laid out like ``flat``.

    >>> spec = ModelSpec(hidden=4, batch=2)
    >>> X, y = load_dataset()
    >>> loss, grad = loss_and_grad(spec, np.zeros(param_count(spec), np.float32), X[:2], y[:2])
    >>> round(loss, 4) == round(float(np.log(10)), 4)
    True
    """
    if flat.dtype != np.float32:
        raise ValueError(f"parameters must be float32, got {flat.dtype}")
    X, labels = _check_samples(spec, X, y)
    n = X.shape[0]
    W2 = unpack(spec, flat)[2]
    pre, z = _logits(spec, flat, X)
    rows = np.arange(n)
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    logp = z[rows, labels] - np.log(s[:, 0])
    inv_batch = np.float32(1.0 / spec.batch)
    loss = float(-logp.sum(dtype=np.float32) * inv_batch)

    dz = e / s                        # softmax
    dz[rows, labels] -= np.float32(1)
    dz *= inv_batch
    hid = np.maximum(pre, np.float32(0))
    grad = np.empty_like(flat)
    gW1, gb1, gW2, gb2 = unpack(spec, grad)
    np.matmul(hid.T, dz, out=gW2)
    np.sum(dz, axis=0, out=gb2)
    dh = dz @ W2.T
    dh[pre <= 0] = np.float32(0)
    np.matmul(X.T, dh, out=gW1)
    np.sum(dh, axis=0, out=gb1)
    return loss, grad


def accuracy(spec: ModelSpec, flat: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    """Fraction of the samples whose arg-max logit is their label.

    >>> spec = ModelSpec(hidden=4)
    >>> 0.0 <= accuracy(spec, init_params(spec), *test_set()) <= 1.0
    True
    """
    X, labels = _check_samples(spec, X, y)
    if X.shape[0] == 0:
        raise ValueError("accuracy of no samples")
    _, z = _logits(spec, np.asarray(flat, dtype=np.float32), X)
    return float(np.mean(z.argmax(axis=1) == labels))


def param_digest(flat: np.ndarray) -> str:
    """SHA-256 (hex) of the parameters' float32 little-endian bytes, in C order: what the
    workers and the shadow compare every iteration.

    >>> param_digest(np.zeros(2, dtype=np.float32))[:16]
    'af5570f5a1810b7a'
    >>> param_digest(np.zeros(2, dtype=">f4")) == param_digest(np.zeros(2, dtype=np.float32))
    True
    """
    if flat.dtype.kind != "f" or flat.dtype.itemsize != 4:
        raise ValueError(f"param_digest: float32 parameters expected, got {flat.dtype}")
    data = np.ascontiguousarray(flat, dtype="<f4")
    return hashlib.sha256(data.tobytes()).hexdigest()
