"""Checkmate end to end in Mininet: the rail switches mirror each iteration's reduced gradient
to a shadow whose parameters are bit-identical to the workers' at every iteration; loss on
the mirror path, two jobs, a shadow restart and a worker restart from the shadow."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from controller.emulation import load_emulation_module
from controller.mirror import (
    MirrorConflict,
    compile_mirror,
    install_mirror,
    parse_job,
    read_mirror,
    resolve_job,
)
from controller.topology import rail_only
from workloads.checkmate.model import ModelSpec
from workloads.checkmate.optim import OptimizerSpec

#: make test runs this module on both engines: clone sessions and mirrored traffic
pytestmark = pytest.mark.both_engines

checkmate_job = load_emulation_module("checkmate_job")
fabric_net = load_emulation_module("fabric_net")


def _job(live, servers: list[str], shadow: str, rails: int, session: int, port: int = 7000):
    workers = [{"rank": i * rails + r, "host": h, "rail": r} for i, h in enumerate(servers) for r in range(rails)]
    spec = parse_job({"name": f"job{session}", "session": session, "shadow": shadow, "port": port,
                      "workers": workers}, f"<job {session}>")
    return compile_mirror(resolve_job(spec, live))


def _training(job, seed: int = 0, kind: str = "sgd", **over):
    return job.training(model=ModelSpec(hidden=32, seed=seed, batch=48),
                        optimizer=OptimizerSpec(kind=kind, lr=0.05), **over)


def _train(group, training, iterations) -> dict[int, str]:
    digests = {}
    for it in iterations:
        row = checkmate_job.train_iteration(group, training, it, timeout_s=60)
        assert row["ok"], row
        assert not row["digest_mismatch"]
        digests[it] = row["digest"]
    return digests


def _shadow_digests(shadow, kinds=("applied",)) -> dict[int, str]:
    return {e["iteration"]: e["digest"] for e in shadow.events() if e["event"] in kinds}


@pytest.fixture
def fabric(target_name: str):
    """Three worker servers with two GPUs each and a shadow server (s3): an odd number of
    servers, so the ring's wrap-around is relayed (PXN) and its mirrored copy too."""
    topo = rail_only(4, 2, rate_mbps=50)
    with fabric_net.EmulatedFabric(topo, target=target_name, publish=False) as fab:
        yield fab


def test_shadow_is_bit_identical_at_every_iteration(fabric, tmp_path: Path) -> None:
    program = _job(fabric.live, ["s0", "s1", "s2"], "s3", rails=2, session=1)
    assert program.plan.primary.relayed
    install_mirror(program)
    job = checkmate_job.CheckmateJob(fabric, program, tmp_path)
    training = _training(job, kind="adam")
    with job.shadow(training) as shadow, job.workers() as group:
        workers = _train(group, training, range(20))
        assert shadow.wait_applied(19)
        replica = _shadow_digests(shadow)
    assert replica == workers, "the shadow must match the workers bit for bit at every iteration"
    rows = read_mirror(program)
    assert len(rows) == 2 and all(r.packets > 0 for r in rows)
    losses = [e for e in shadow.events() if e["event"] == "applied"]
    assert all(e["frame_bytes"] >= 4 * len(program.job.layout.ranks) for e in losses)


def test_loss_on_the_mirror_path_is_reported_and_replication_resumes(fabric, tmp_path: Path) -> None:
    program = _job(fabric.live, ["s0", "s1", "s2"], "s3", rails=2, session=2)
    install_mirror(program)
    job = checkmate_job.CheckmateJob(fabric, program, tmp_path)
    training = _training(job)
    # every 40th mirrored data segment is lost: 30 iterations carry several hundred of them
    with job.shadow(training, drop_every=40) as shadow, job.workers() as group:
        workers = _train(group, training, range(30))
        assert shadow.wait_applied(29, timeout_s=20)
    events = shadow.events()  # stopped: with its counters
    holes = [e["iteration"] for e in events if e["event"] == "hole"]
    drops = next(e["injected_drops"] for e in events if e["event"] == "stopped")
    assert drops >= 3 and holes, "every lost copy touches an iteration, which must be reported"
    state = {e["iteration"]: e["digest"] for e in events if e["event"] in ("applied", "resync")}
    assert all(workers[i] == d for i, d in state.items()), "never a silently diverged replica"
    assert not set(holes) & {e["iteration"] for e in events if e["event"] == "applied"}
    assert state[29] == workers[29]


def test_two_jobs_mirror_to_two_shadows_without_crosstalk(target_name: str, tmp_path: Path) -> None:
    topo = rail_only(6, 1, rate_mbps=50)
    with fabric_net.EmulatedFabric(topo, target=target_name, publish=False) as fab:
        a = _job(fab.live, ["s0", "s1"], "s2", rails=1, session=1, port=7000)
        b = _job(fab.live, ["s3", "s4"], "s5", rails=1, session=2, port=7100)
        install_mirror(a)
        install_mirror(b)
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        ja = checkmate_job.CheckmateJob(fab, a, tmp_path / "a")
        jb = checkmate_job.CheckmateJob(fab, b, tmp_path / "b")
        ta, tb = _training(ja, seed=1), _training(jb, seed=2)
        with ja.shadow(ta) as sa, jb.shadow(tb) as sb, ja.workers() as ga, jb.workers() as gb:
            wa, wb = {}, {}
            for it in range(10):
                wa.update(_train(ga, ta, [it]))
                wb.update(_train(gb, tb, [it]))
            assert sa.wait_applied(9) and sb.wait_applied(9)
        assert _shadow_digests(sa) == wa and _shadow_digests(sb) == wb
        assert wa[9] != wb[9]
        stopped = [e for e in sa.events() + sb.events() if e["event"] == "stopped"]
        assert all(e["ignored"] == 0 for e in stopped), "a shadow saw the other job's copies"


def test_a_session_in_use_installs_nothing(fabric) -> None:
    a = _job(fabric.live, ["s0", "s1", "s2"], "s3", rails=2, session=4)
    install_mirror(a)
    other = _job(fabric.live, ["s0", "s1"], "s3", rails=2, session=4, port=7400)
    with pytest.raises(MirrorConflict, match="session id"):
        install_mirror(other)
    assert len(read_mirror(other)) == 0 and len(read_mirror(a)) == 2


def test_shadow_restart_rejoins_and_worker_restart_from_the_shadow(fabric, tmp_path: Path) -> None:
    program = _job(fabric.live, ["s0", "s1", "s2"], "s3", rails=2, session=5)
    install_mirror(program)
    job = checkmate_job.CheckmateJob(fabric, program, tmp_path)
    training = _training(job)
    with job.workers() as group:
        with job.shadow(training, report=tmp_path / "first.jsonl") as shadow:
            workers = _train(group, training, range(6))
            assert shadow.wait_applied(5)
        workers.update(_train(group, training, range(6, 9)))  # no shadow running
        with job.shadow(training, join=True, report=tmp_path / "second.jsonl") as shadow:
            workers.update(_train(group, training, range(9, 16)))
            assert shadow.wait_applied(15)
            events = shadow.events()
    joined = [e for e in events if e["event"] == "resync"]
    assert joined and joined[0]["reason"] == "join"
    applied = {e["iteration"]: e["digest"] for e in events if e["event"] == "applied"}
    assert applied and all(workers[i] == d for i, d in applied.items())
    assert max(applied) == 15
    # every worker restarts from the shadow's checkpoint and trains on, as if never stopped
    ckpt = job.shadow_dir / "shadow-latest.npz"
    restored = dataclasses.replace(training, restore=str(ckpt), mirror=False)
    with job.workers("restored") as group:
        again = _train(group, restored, range(16, 19))
    with job.workers("reference") as group:
        reference = _train(group, dataclasses.replace(training, mirror=False), range(19))
    assert again == {i: reference[i] for i in range(16, 19)}


def test_mirror_cli_add_show_remove_against_a_live_fabric(fabric, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    import yaml

    from controller.mirror.job import job_to_dict
    from controller.topology import dump_topology

    program = _job(fabric.live, ["s0", "s1", "s2"], "s3", rails=2, session=7)
    topo_file, job_file = tmp_path / "live.yaml", tmp_path / "job.yaml"
    dump_topology(fabric.live, topo_file)
    job_file.write_text(yaml.safe_dump(job_to_dict(program.job.spec)))

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "controller.cli", "mirror", *args, str(job_file),
                               "--topology", str(topo_file)], capture_output=True, text=True, timeout=60)

    added = cli("add", "--json")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["switches"] == ["rail0", "rail1"]
    shown = json.loads(cli("show", "--json").stdout)
    assert len(shown["entries"]) == 2 and shown["missing"] == 0
    again = cli("add")
    assert again.returncode == 0, "adding the same job twice is idempotent"
    removed = json.loads(cli("remove", "--json").stdout)
    assert removed["deleted"] == 2 * 2 + 2  # per switch: select, rewrite, clone session
    assert json.loads(cli("show", "--json").stdout)["missing"] == 2
    bad = yaml.safe_load(job_file.read_text())
    bad["workers"][0]["host"] = "s9"
    job_file.write_text(yaml.safe_dump(bad))
    err = cli("add")
    assert err.returncode == 1 and err.stderr.count("\n") == 1 and "unknown worker host" in err.stderr
