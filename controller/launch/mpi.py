"""Open MPI on an emulated fabric: the ``mpirun`` command line for a placement (pure).

``mpirun`` runs inside the first rank's host; it starts one ``orted`` per host through an
rsh agent that enters that host's network namespace (:mod:`controller.launch.rsh`; no sshd).
Each rank is its own application context (MPMD ``-np 1 -host H ... : ...``), in rank order,
so that Open MPI numbers them as the placement does and each gets its own environment: its
rail, and ``OMPI_MCA_btl_tcp_if_include`` set to its own NIC's network, so that its TCP
traffic leaves through its rail's NIC. Ranks on one host talk through shared memory
(``vader``), as GPUs of one server talk over NVLink. The daemons' out-of-band channel uses
the first rank's network (every server has a NIC on rail 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.launch.idle import IDLE_ENV
from controller.launch.placement import Placement, environment

__all__ = ["FORWARDED", "STARTUP_TIMEOUT_S", "hostfile", "mpirun_argv"]

#: seconds mpirun waits for every host's daemon to call back before it fails the job
STARTUP_TIMEOUT_S = 60

#: the project's variables each rank gets (``-x NAME=VALUE``), next to Open MPI's own
FORWARDED = ("MLFABRIC_HOST", "MLFABRIC_RAIL", "MLFABRIC_GPU", "MLFABRIC_NIC", "MLFABRIC_NIC_ADDR",
             "MLFABRIC_SUBNET", "GLOO_SOCKET_IFNAME", "MASTER_ADDR", "MASTER_PORT")


def hostfile(placement: Placement) -> str:
    """One line per host with its slots.

    >>> from controller.launch.placement import place
    >>> from controller.topology import rail_only
    >>> print(hostfile(place(rail_only(2, 2), gpus=True)), end="")
    s0 slots=2
    s1 slots=2
    """
    slots: dict[str, int] = {}
    for r in placement.ranks:
        slots[r.host] = slots.get(r.host, 0) + 1
    return "".join(f"{h} slots={n}\n" for h, n in slots.items())


def mpirun_argv(placement: Placement, command: Sequence[str], *, agent: str, hostfile_path: str,
                shm_dir: str = "/dev/shm", mca: Mapping[str, str] | None = None, mpirun: str = "mpirun",
                idle_library: str | None = None, idle_us: int = 0) -> list[str]:
    """The ``mpirun`` command that runs ``command`` once per rank of ``placement``.

    The emulated hosts share this machine's hostname and ``/dev/shm``, where Open MPI's
    shared-memory transport names its segments after the hostname and the local rank: each
    host's ranks get a directory of their own (``shm_dir/HOST``, which must exist), or local
    rank 0 of one host maps local rank 0 of another's segment.

    With ``idle_library`` (:mod:`controller.launch.idle`) and ``idle_us`` > 0, a waiting
    rank sleeps ``idle_us`` between polls instead of spinning.

    >>> from controller.launch.placement import place
    >>> from controller.topology import rail_only
    >>> argv = mpirun_argv(place(rail_only(2, 1), gpus=True), ["python", "j.py"], agent="/a", hostfile_path="/h")
    >>> argv[:3], argv.count(":"), argv[-2:]
    (['mpirun', '--allow-run-as-root', '--hostfile'], 1, ['python', 'j.py'])
    >>> "OMPI_MCA_btl_tcp_if_include=10.0.0.0/16" in argv
    True
    >>> argv = mpirun_argv(place(rail_only(2, 1), gpus=True), ["j"], agent="/a", hostfile_path="/h",
    ...                    idle_library="/i.so", idle_us=50)
    >>> argv.count("LD_PRELOAD=/i.so"), argv[argv.index("mpi_yield_when_idle") + 1]
    (2, '1')
    """
    first = placement.ranks[0]
    params = {"plm_rsh_agent": agent, "plm_rsh_no_tree_spawn": "1", "oob_tcp_if_include": first.subnet,
              "btl": "self,vader,tcp", "btl_tcp_if_include": ",".join(sorted({r.subnet for r in placement.ranks})),
              "btl_vader_single_copy_mechanism": "none", "orte_abort_on_non_zero_status": "1",
              "orte_startup_timeout": str(STARTUP_TIMEOUT_S),
              # each orted maps the machine's hwloc topology into a hole of its address space,
              # found once and shared: with several daemons on one machine it sometimes lands
              # on one's stack (a segfault in hwloc_shmem_topology_write, 1 start in 12)
              "rtc_hwloc_vmhole": "none"}
    if idle_library and idle_us > 0:
        params["mpi_yield_when_idle"] = "1"
    params.update(mca or {})
    # the daemons stay attached (their errors reach mpirun's output, and a daemon that dies is
    # noticed), and a daemon that never calls back fails the job instead of hanging it
    argv = [mpirun, "--allow-run-as-root", "--hostfile", hostfile_path, "--tag-output", "--leave-session-attached"]
    for key, value in params.items():
        argv += ["--mca", key, value]
    for i, slot in enumerate(placement.ranks):
        env = environment(placement, slot)
        if i:
            argv.append(":")
        argv += ["-np", "1", "-host", f"{slot.host}:{slot.local_world}",
                 "-x", f"OMPI_MCA_btl_tcp_if_include={slot.subnet}",
                 "-x", f"OMPI_MCA_btl_vader_backing_directory={shm_dir}/{slot.host}"]
        argv += [x for name in FORWARDED if name in env for x in ("-x", f"{name}={env[name]}")]
        if idle_library and idle_us > 0:
            argv += ["-x", f"LD_PRELOAD={idle_library}", "-x", f"{IDLE_ENV}={idle_us}"]
        argv += list(command)
    return argv
