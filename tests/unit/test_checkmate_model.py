"""The Checkmate model, optimizer and checkpoints: correct gradients, bit-exact replay,
learning, atomic checkpoints and strict configuration."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from workloads.checkmate import model as model_mod
from workloads.checkmate.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from workloads.checkmate.model import (
    ModelSpec,
    accuracy,
    batch_indices,
    check_world,
    init_params,
    load_dataset,
    loss_and_grad,
    param_count,
    param_digest,
    unpack,
)
from workloads.checkmate.optim import Optimizer, OptimizerSpec
from workloads.errors import ConfigError

KINDS = {"sgd": OptimizerSpec(kind="sgd", lr=0.1, momentum=0.9),
         "adam": OptimizerSpec(kind="adam", lr=0.01, weight_decay=1e-4)}


def reference_loss(spec: ModelSpec, flat: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    """An independent float64 implementation of the loss (sum over samples / global batch)."""
    h = spec.hidden
    f = flat.astype(np.float64)
    W1 = f[:64 * h].reshape(64, h)
    b1 = f[64 * h:65 * h]
    W2 = f[65 * h:75 * h].reshape(h, 10)
    b2 = f[75 * h:]
    z = np.maximum(X.astype(np.float64) @ W1 + b1, 0) @ W2 + b2
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].sum() / spec.batch)


def shard_grad_sum(spec: ModelSpec, flat: np.ndarray, iteration: int,
                   world: int) -> tuple[float, np.ndarray]:
    X, y = load_dataset()
    total = np.zeros_like(flat)
    loss = 0.0
    for rank in range(world):
        idx = batch_indices(spec, iteration, rank, world)
        part_loss, grad = loss_and_grad(spec, flat, X[idx], y[idx])
        total += grad
        loss += part_loss
    return loss, total


# --- model -----------------------------------------------------------------------------------


def test_init_is_deterministic_and_layout_matches() -> None:
    spec = ModelSpec(hidden=16, seed=3)
    a, b = init_params(spec), init_params(spec)
    assert a.dtype == np.float32 and a.shape == (param_count(spec),)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert not np.array_equal(a, init_params(ModelSpec(hidden=16, seed=4)))
    W1, b1, W2, b2 = unpack(spec, a)
    assert (W1.shape, b1.shape, W2.shape, b2.shape) == ((64, 16), (16,), (16, 10), (10,))
    W2[0, 0] = 42.0  # views: writes go through
    assert a[64 * 16 + 16] == np.float32(42.0)
    with pytest.raises(ValueError, match="expected"):
        unpack(spec, a[:-1])


def test_dataset_is_scaled_and_cached() -> None:
    X, y = load_dataset()
    assert X.shape == (1797, 64) and X.dtype == np.float32 and y.dtype == np.int64
    assert X.min() >= 0.0 and X.max() == 1.0
    assert load_dataset()[0] is X
    assert not X.flags.writeable
    Xt, yt = model_mod.test_set()
    assert len(Xt) == len(yt) == model_mod.TEST_SIZE


@pytest.mark.parametrize("world", [1, 2, 3, 4, 7, 32])
def test_batch_is_partitioned_over_ranks(world: int) -> None:
    spec = ModelSpec(batch=64, seed=5)
    whole = batch_indices(spec, 9, 0, 1)
    assert len(set(whole.tolist())) == 64 and whole.max() < model_mod.TRAIN_SIZE
    parts = [batch_indices(spec, 9, r, world) for r in range(world)]
    assert np.array_equal(np.concatenate(parts), whole)
    assert all(len(p) >= 1 for p in parts)
    assert not np.array_equal(batch_indices(spec, 10, 0, 1), whole)


def test_world_larger_than_batch_is_rejected() -> None:
    check_world(ModelSpec(batch=32), 32)
    with pytest.raises(ConfigError, match=r"batch: .* world size 33 \(got 32\)"):
        check_world(ModelSpec(batch=32), 33)
    with pytest.raises(ConfigError, match="world"):
        batch_indices(ModelSpec(batch=32), 0, 0, 0)
    with pytest.raises(ValueError, match="rank 4"):
        batch_indices(ModelSpec(batch=32), 0, 4, 4)


@pytest.mark.parametrize(("key", "kwargs"), [("hidden", {"hidden": 0}), ("batch", {"batch": 0}),
                                             ("batch", {"batch": 10**6}), ("seed", {"seed": -1}),
                                             ("hidden", {"hidden": 2.5})])
def test_model_spec_validation_names_the_key(key: str, kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as info:
        ModelSpec(**kwargs)  # type: ignore[arg-type]
    assert info.value.key == key and info.value.value == next(iter(kwargs.values()))


def test_gradient_matches_finite_differences() -> None:
    spec = ModelSpec(hidden=5, seed=1, batch=12)
    X, y = load_dataset()
    idx = batch_indices(spec, 0, 0, 2)            # 6 of the 12 samples: divides by 12
    Xs, ys = X[idx], y[idx]
    flat = init_params(spec)
    flat += np.random.default_rng(2).normal(0, 0.05, flat.size).astype(np.float32)  # nonzero biases
    loss, grad = loss_and_grad(spec, flat, Xs, ys)
    ref = reference_loss(spec, flat, Xs, ys)
    assert loss == pytest.approx(ref, rel=1e-5)
    rng = np.random.default_rng(3)
    W1 = 64 * spec.hidden
    # coordinates of each block: W1, b1, W2, b2, plus random ones
    coords = [W1 // 2 + 3, W1 + 2, W1 + spec.hidden + 7, param_count(spec) - 1,
              *rng.integers(0, param_count(spec), 8).tolist()]
    eps = 1e-6
    f64 = flat.astype(np.float64)
    for i in coords:
        plus, minus = f64.copy(), f64.copy()
        plus[i] += eps
        minus[i] -= eps
        numeric = (reference_loss(spec, plus, Xs, ys)
                   - reference_loss(spec, minus, Xs, ys)) / (2 * eps)
        assert grad[i] == pytest.approx(numeric, rel=1e-3, abs=1e-6), f"coordinate {i}"


@pytest.mark.parametrize("world", [2, 4, 7, 32])
def test_shard_gradients_sum_to_the_global_gradient(world: int) -> None:
    spec = ModelSpec(hidden=16, batch=64)
    flat = init_params(spec)
    loss1, grad1 = shard_grad_sum(spec, flat, 4, 1)
    loss_w, grad_w = shard_grad_sum(spec, flat, 4, world)
    assert grad_w.dtype == np.float32
    np.testing.assert_allclose(grad_w, grad1, rtol=0, atol=1e-5)
    assert loss_w == pytest.approx(loss1, rel=1e-5)


def test_digest_is_of_the_float32_bytes() -> None:
    a = init_params(ModelSpec(hidden=4))
    b = a.copy()
    assert param_digest(a) == param_digest(b)
    b[7] = np.nextafter(b[7], np.float32(np.inf))  # one ulp
    assert param_digest(a) != param_digest(b)
    with pytest.raises(ValueError, match="float64"):
        param_digest(a.astype(np.float64))


# --- optimizer -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_optimizer_replay_is_bit_identical(kind: str) -> None:
    """Worker and shadow: same code, same summed gradients, same bits, every step."""
    spec = ModelSpec(hidden=16, batch=32)
    ospec = KINDS[kind]
    worker, shadow = init_params(spec), init_params(spec)
    opt_w, opt_s = Optimizer(ospec, worker.size), Optimizer(ospec, shadow.size)
    for it in range(50):
        _, grad = shard_grad_sum(spec, worker, it, 4)
        mirrored = grad.copy()                       # what the switch hands the shadow
        opt_w.step(worker, grad, 4)
        opt_s.step(shadow, mirrored, 4)
        assert np.array_equal(worker.view(np.uint32), shadow.view(np.uint32)), f"iteration {it}"
        assert param_digest(worker) == param_digest(shadow)
        assert np.array_equal(grad, mirrored)        # the step does not touch its input
    for key, value in opt_w.state().items():
        assert np.array_equal(value, opt_s.state()[key])


@pytest.mark.parametrize("kind", KINDS)
def test_training_reduces_the_loss(kind: str) -> None:
    spec = ModelSpec(hidden=32, batch=64)
    flat = init_params(spec)
    opt = Optimizer(KINDS[kind], flat.size)
    losses = []
    for it in range(100):
        loss, grad = shard_grad_sum(spec, flat, it, 4)
        losses.append(loss)
        opt.step(flat, grad, 4)
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
    assert accuracy(spec, flat, *model_mod.test_set()) > 0.7


def test_sgd_matches_the_pytorch_formula() -> None:
    ospec = OptimizerSpec(kind="sgd", lr=0.5, momentum=0.5, weight_decay=0.25)
    opt = Optimizer(ospec, 1)
    p = np.array([2.0], dtype=np.float32)
    opt.step(p, np.array([4.0], dtype=np.float32), 2)   # g = 2 + 0.25*2 = 2.5, v = 2.5
    assert p[0] == np.float32(2.0 - 0.5 * 2.5)
    opt.step(p, np.array([0.0], dtype=np.float32), 2)   # g = 0.1875, v = 1.25 + 0.1875
    assert p[0] == pytest.approx(0.75 - 0.5 * 1.4375, rel=1e-6)


def test_adam_first_step_moves_by_lr() -> None:
    opt = Optimizer(OptimizerSpec(kind="adam", lr=0.01), 3)
    p = np.zeros(3, dtype=np.float32)
    opt.step(p, np.array([3.0, -0.5, 0.0], dtype=np.float32), 3)
    np.testing.assert_allclose(p, [-0.01, 0.01, 0.0], rtol=1e-5)


def test_optimizer_state_round_trip_continues_bit_identically() -> None:
    ospec = KINDS["adam"]
    rng = np.random.default_rng(0)
    grads = rng.normal(size=(10, 20)).astype(np.float32)
    a = np.ones(20, dtype=np.float32)
    opt_a = Optimizer(ospec, 20)
    for g in grads[:5]:
        opt_a.step(a, g, 2)
    b = a.copy()
    opt_b = Optimizer(ospec, 20)
    opt_b.load_state(opt_a.state())
    for g in grads[5:]:
        opt_a.step(a, g, 2)
        opt_b.step(b, g, 2)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert int(opt_b.state()["step"]) == 10


def test_optimizer_state_is_checked() -> None:
    opt = Optimizer(OptimizerSpec(kind="sgd"), 4)
    state = opt.state()
    with pytest.raises(ConfigError, match="velocity: must be float32 of shape"):
        opt.load_state({**state, "velocity": np.zeros(5, dtype=np.float32)})
    with pytest.raises(ConfigError, match="m: unknown key for sgd"):
        opt.load_state({**state, "m": np.zeros(4, dtype=np.float32)})
    with pytest.raises(ConfigError, match="step: missing"):
        opt.load_state({"velocity": state["velocity"]})
    with pytest.raises(ConfigError, match="step: must be a 0-d integer"):
        opt.load_state({**state, "step": np.array(1.5)})
    with pytest.raises(ValueError, match="grad_sum must be float32"):
        opt.step(np.zeros(4, np.float32), np.zeros(4, np.float64), 1)
    with pytest.raises(ValueError, match="world 0"):
        opt.step(np.zeros(4, np.float32), np.zeros(4, np.float32), 0)


@pytest.mark.parametrize(("data", "key", "value"), [
    ({"kind": "rmsprop"}, "optimizer.kind", "rmsprop"),
    ({"lr": 0}, "optimizer.lr", 0),
    ({"momentum": 1.0}, "optimizer.momentum", 1.0),
    ({"beta2": -0.1}, "optimizer.beta2", -0.1),
    ({"eps": "tiny"}, "optimizer.eps", "tiny"),
    ({"weight_decay": True}, "optimizer.weight_decay", True),
    ({"nesterov": True}, "optimizer.nesterov", True),
])
def test_optimizer_spec_is_strict(data: dict[str, object], key: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        OptimizerSpec.from_dict(data, "job.json")
    assert (info.value.file, info.value.key, info.value.value) == ("job.json", key, value)
    assert repr(value) in str(info.value)


def test_optimizer_spec_round_trip() -> None:
    spec = OptimizerSpec(kind="adam", lr=1, beta1=0.8)
    assert isinstance(spec.lr, float)
    assert OptimizerSpec.from_dict(spec.to_dict()) == spec


# --- checkpoints -----------------------------------------------------------------------------


def _save(path: Path, iteration: int, value: float) -> Path:
    opt = Optimizer(KINDS["adam"], 6)
    return save_checkpoint(path, iteration=iteration, params=np.full(6, value, dtype=np.float32),
                           optimizer_state=opt.state(), meta={"source": "test", "it": iteration})


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    spec = ModelSpec(hidden=8)
    params = init_params(spec)
    opt = Optimizer(KINDS["sgd"], params.size)
    _, grad = shard_grad_sum(spec, params, 0, 2)
    opt.step(params, grad, 2)
    path = save_checkpoint(tmp_path / "sub" / "ck.npz", iteration=0, params=params,
                           optimizer_state=opt.state(), meta={"rank": 0, "ring": "pxn"})
    ck = load_checkpoint(path)
    assert ck.iteration == 0 and ck.meta == {"rank": 0, "ring": "pxn"}
    assert param_digest(ck.params) == param_digest(params)
    assert set(ck.optimizer_state) == {"velocity", "step"}
    restored = Optimizer(KINDS["sgd"], params.size)
    restored.load_state(ck.optimizer_state)
    assert [p.name for p in path.parent.iterdir()] == ["ck.npz"]   # no temp file left


def test_crash_during_replace_keeps_the_previous_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _save(tmp_path / "ck.npz", 1, 1.0)

    def crash(src: object, dst: object) -> None:
        raise OSError("simulated crash")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        _save(path, 2, 2.0)
    monkeypatch.undo()
    ck = load_checkpoint(path)
    assert ck.iteration == 1 and ck.params[0] == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["ck.npz"]


def test_stale_temp_file_is_harmless(tmp_path: Path) -> None:
    path = _save(tmp_path / "ck.npz", 1, 1.0)
    (tmp_path / "ck.npz.tmp-99999").write_bytes(b"PK\x03\x04 torn write")   # a dead writer's
    assert load_checkpoint(path).iteration == 1
    _save(path, 2, 2.0)
    assert load_checkpoint(path).iteration == 2


def test_missing_and_corrupt_checkpoints_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "none.npz"
    with pytest.raises(CheckpointError, match=r"none\.npz: no such file"):
        load_checkpoint(missing)
    path = _save(tmp_path / "ck.npz", 1, 1.0)
    data = path.read_bytes()
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"truncated\.npz: corrupt"):
        load_checkpoint(truncated)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip at all")
    with pytest.raises(CheckpointError, match=r"garbage\.npz"):
        load_checkpoint(garbage)
    other = tmp_path / "other.npz"
    np.savez(other, params=np.zeros(3, np.float32))
    with pytest.raises(CheckpointError,
                       match=r"other\.npz: not a checkpoint \(no format, iteration, meta\)"):
        load_checkpoint(other)


def test_bad_meta_is_rejected_before_writing(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="meta is not JSON"):
        save_checkpoint(tmp_path / "ck.npz", iteration=0, params=np.zeros(2, np.float32),
                        optimizer_state={}, meta={"x": object()})
    assert list(tmp_path.iterdir()) == []


def test_the_digits_are_exactly_scikit_learns_load_digits() -> None:
    """load_dataset reads scikit-learn's file without importing it: the same arrays."""
    import numpy as np
    from sklearn.datasets import load_digits

    from workloads.checkmate.model import load_dataset

    X, y = load_dataset()
    d = load_digits()
    assert np.array_equal(X, np.ascontiguousarray(d.data / 16.0, dtype=np.float32))
    assert np.array_equal(y, d.target) and y.dtype == np.int64
