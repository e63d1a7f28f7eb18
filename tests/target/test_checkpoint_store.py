"""The checkpoint store (:mod:`workloads.checkmate.storage`) on this machine's loopback: what a
PUT stores is what a GET returns, checked by digest, atomically; bad names and missing
checkpoints are refused by name; a trainer's checkpoint goes there when its checkpoint_dir
is a store's URL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from workloads.checkmate import storage
from workloads.checkmate.checkpoint import checkpoint_bytes, load_checkpoint_bytes


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    server = storage.serve(tmp_path / "store", "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", tmp_path / "store"
    finally:
        server.shutdown()
        server.server_close()


def test_a_checkpoint_put_is_stored_atomically_and_got_back(store: tuple[str, Path]) -> None:
    url, root = store
    params = np.arange(300_000, dtype=np.float32)
    data = checkpoint_bytes(iteration=7, params=params, optimizer_state={"m": params * 2}, meta={"rank": 0})
    answer = storage.put(f"{url}/worker-latest.npz", data)
    assert answer["bytes"] == len(data) and (root / "worker-latest.npz").read_bytes() == data
    assert not [p for p in root.iterdir() if ".tmp-" in p.name]  # nothing half-written left
    ck = load_checkpoint_bytes(storage.get(f"{url}/worker-latest.npz"), url)
    assert ck.iteration == 7 and np.array_equal(ck.params, params) and np.array_equal(ck.optimizer_state["m"], params * 2)
    storage.put(f"{url}/worker-latest.npz", data[:1000])  # a newer one replaces it whole
    assert (root / "worker-latest.npz").stat().st_size == 1000


@pytest.mark.parametrize(("call", "message"), [
    (lambda url: storage.put(f"{url}/..%2Fescape", b"x"), "bad checkpoint name"),
    (lambda url: storage.get(f"{url}/nothing.npz"), "404 no checkpoint nothing.npz"),
    (lambda url: storage.get("ftp://store/x"), "not a checkpoint URL"),
    (lambda url: storage.get("http://127.0.0.1:1/x.npz"), "GET http://127.0.0.1:1/x.npz"),
])
def test_bad_requests_are_refused_by_name(store: tuple[str, Path], call, message: str) -> None:
    with pytest.raises(storage.StorageError, match=message):
        call(store[0])


def test_a_checkpoint_sent_in_chunks_is_committed_whole_by_its_last_chunk(store: tuple[str, Path]) -> None:
    import hashlib

    url, root = store
    data = bytes(range(256)) * 1000
    digest = hashlib.sha256(data).hexdigest()
    for offset in range(0, len(data), 100_000):
        answer = storage.put_chunk(f"{url}/peer.npz", data[offset:offset + 100_000], offset, len(data),
                                   whole_sha256=digest)
        if offset + 100_000 < len(data):  # nothing visible before the last chunk
            assert answer["received"] == offset + 100_000 and not (root / "peer.npz").exists()
    assert storage.get(f"{url}/peer.npz") == data and not [p for p in root.iterdir() if p.name != "peer.npz"]
    with pytest.raises(storage.StorageError, match=r"409 chunk at 5 of peer\.npz: the store has 0 bytes"):
        storage.put_chunk(f"{url}/peer.npz", b"xyz", 5, 10)  # out of order: refused, the old one kept
    with pytest.raises(storage.StorageError, match="does not fit in total 4"):
        storage.put_chunk(f"{url}/peer.npz", b"xyz", 2, 4)
    assert storage.get(f"{url}/peer.npz") == data


@pytest.mark.parametrize("mode", ["sync", "checkfreq", "gemini"])
def test_a_trainer_checkpoints_to_the_store_and_resumes_from_it_identically(store: tuple[str, Path], mode: str) -> None:
    from workloads.checkmate.model import ModelSpec
    from workloads.checkmate.optim import OptimizerSpec
    from workloads.checkmate.training import TrainingConfig
    from workloads.driver import WorkerGroup
    from workloads.loopback import loopback_config, subprocess_factory

    url, _ = store
    base = TrainingConfig(model=ModelSpec(hidden=16, seed=4, batch=24), optimizer=OptimizerSpec(kind="adam", lr=0.01), mirror=False,
                          checkpoint_every=4, checkpoint_dir=url, checkpoint_mode=mode)  # after iteration 3 only
    digests = {}
    with WorkerGroup(subprocess_factory(), loopback_config(2, 1, timeout_s=10, mesh="rail"), op_timeout_s=30) as group:
        for it in range(6):
            results = group.run({"op": "ckpt_train", "iter": it, "training": base.to_dict()})
            assert all(r["ok"] for r in results), results
            digests[it] = results[0]["digest"]
            if it == 3:
                assert "checkpoint" in results[0]["phases"]
            if it >= 4 and mode != "sync":  # persisting in the background: reported once it landed
                assert results[0]["persisted"] in (-1, 3)
    # the checkpoint of iteration 3 went to the store, over a socket (closing waits for a persist in flight)
    latest = f"{url}/worker-{mode}-latest.npz"
    ck = load_checkpoint_bytes(storage.get(latest), url)
    assert ck.iteration == 3
    resumed = TrainingConfig(model=base.model, optimizer=base.optimizer, mirror=False, restore=latest)
    with WorkerGroup(subprocess_factory(), loopback_config(2, 1, timeout_s=10, mesh="rail"), op_timeout_s=30) as group:
        for it in (4, 5):
            results = group.run({"op": "ckpt_train", "iter": it, "training": resumed.to_dict()})
            assert all(r["ok"] for r in results), results
            assert results[0]["digest"] == digests[it], f"iteration {it} differs after resuming from the store"
