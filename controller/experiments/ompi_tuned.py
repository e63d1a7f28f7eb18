"""Which algorithm Open MPI 4.1's ``coll/tuned`` runs for an allreduce or an all-to-all, and
the MCA parameters that force one. Pure.

Open MPI picks an algorithm per call from the communicator's size and the message's bytes
(``ompi_coll_tuned_*_intra_dec_fixed`` in ``ompi/mca/coll/tuned/coll_tuned_decision_fixed.c``).
The tables here are those of v4.1.4, the version Debian bookworm ships (``openmpi-bin``
4.1.4), for a commutative operation (a sum), so that a run can record what "the default"
ran without instrumenting the library. Setting ``coll_tuned_use_dynamic_rules`` and
``coll_tuned_<collective>_algorithm`` forces one instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from controller.errors import ConfigError

__all__ = ["ALGORITHMS", "TABLE_VERSION", "check_version", "default_algorithm", "forced_mca", "parse_version"]

#: the Open MPI release the decision tables below were read from
TABLE_VERSION = "4.1.4"

#: each collective's algorithms by coll/tuned's number
ALGORITHMS: dict[str, dict[int, str]] = {
    "allreduce": {1: "basic_linear", 2: "nonoverlapping", 3: "recursive_doubling", 4: "ring", 5: "segmented_ring",
                  6: "rabenseifner"},
    "alltoall": {1: "linear", 2: "pairwise", 3: "modified_bruck", 4: "linear_sync", 5: "two_proc"},
}

_Rule = tuple[int | None, Sequence[tuple[int | None, int]]]

# (communicators below this size, [(messages below this many bytes, algorithm), ...]);
# None: no bound. From v4.1.4's coll_tuned_decision_fixed.c, the commutative branch.
_ALLREDUCE: Sequence[_Rule] = (
    (4, ((8, 4), (4096, 3), (8192, 4), (16384, 3), (65536, 4), (262144, 5), (None, 6))),
    (8, ((16, 4), (8192, 3), (None, 6))),
    (16, ((8192, 3), (None, 6))),
    (32, ((64, 5), (4096, 3), (None, 6))),
    (64, ((128, 5), (None, 6))),
    (128, ((262144, 3), (None, 6))),
    (256, ((131072, 2), (262144, 3), (None, 6))),
    (512, ((4096, 2), (None, 6))),
    (2048, ((2048, 2), (16384, 3), (None, 6))),
    (4096, ((2048, 2), (4096, 5), (16384, 3), (None, 6))),
    (None, ((2048, 2), (16384, 5), (32768, 3), (None, 6))),
)
# the all-to-all's bytes are one peer's block; a communicator of exactly 2 has its own rule
_ALLTOALL_TWO: Sequence[tuple[int | None, int]] = (
    (2, 2), (4, 5), (16, 2), (64, 5), (256, 2), (4096, 5), (32768, 2), (262144, 4), (1048576, 5), (None, 2))
_ALLTOALL: Sequence[_Rule] = (
    (8, ((8192, 4), (16384, 1), (65536, 4), (524288, 1), (1048576, 2), (None, 1))),
    (16, ((262144, 4), (None, 1))),
    (32, ((4, 4), (512, 3), (8192, 4), (32768, 1), (262144, 4), (524288, 1), (None, 4))),
    (64, ((512, 3), (524288, 1), (None, 4))),
    (128, ((1024, 3), (2048, 1), (4096, 4), (262144, 1), (None, 2))),
    (256, ((1024, 3), (2048, 4), (262144, 1), (None, 2))),
    (512, ((1024, 3), (8192, 4), (32768, 1), (None, 2))),
    (1024, ((512, 3), (8192, 4), (16384, 1), (131072, 4), (262144, 1), (None, 2))),
    (2048, ((512, 3), (1024, 4), (2048, 1), (16384, 4), (262144, 1), (None, 4))),
    (4096, ((1024, 3), (4096, 4), (8192, 1), (131072, 4), (None, 1))),
    (None, ((2048, 3), (8192, 4), (16384, 1), (32768, 4), (65536, 1), (None, 4))),
)


def _pick(rules: Sequence[tuple[int | None, int]], size: int) -> int:
    return next(alg for below, alg in rules if below is None or size < below)


def default_algorithm(collective: str, ranks: int, buffer_bytes: int) -> str:
    """What Open MPI 4.1.4 runs for ``collective`` over ``ranks`` ranks, each with a buffer
    of ``buffer_bytes`` (an all-to-all sends ``buffer_bytes / ranks`` to each peer).

    >>> default_algorithm("allreduce", 16, 1 << 20), default_algorithm("allreduce", 16, 1024)
    ('rabenseifner', 'recursive_doubling')
    >>> default_algorithm("alltoall", 16, 1 << 20), default_algorithm("alltoall", 16, 4 << 20)
    ('linear_sync', 'linear')
    >>> default_algorithm("alltoall", 2, 1024)
    'two_proc'
    """
    if collective not in ALGORITHMS:
        raise ConfigError("<collectives>", "collective", collective, f"one of {', '.join(ALGORITHMS)}")
    if ranks < 2:
        raise ConfigError("<collectives>", "ranks", ranks, "a collective needs at least 2 ranks")
    if collective == "allreduce":
        rules = next(r for below, r in _ALLREDUCE if below is None or ranks < below)
        return ALGORITHMS[collective][_pick(rules, buffer_bytes)]
    block = buffer_bytes // ranks
    if ranks == 2:
        return ALGORITHMS[collective][_pick(_ALLTOALL_TWO, block)]
    rules = next(r for below, r in _ALLTOALL if below is None or ranks < below)
    return ALGORITHMS[collective][_pick(rules, block)]


def forced_mca(collective: str, algorithm: str) -> dict[str, str]:
    """The MCA parameters that make coll/tuned run ``algorithm`` for ``collective``.

    >>> forced_mca("allreduce", "ring")
    {'coll_tuned_use_dynamic_rules': '1', 'coll_tuned_allreduce_algorithm': '4'}
    """
    numbers = {name: n for n, name in ALGORITHMS.get(collective, {}).items()}
    if algorithm not in numbers:
        raise ConfigError("<collectives>", f"{collective} algorithm", algorithm,
                          f"one of {', '.join(numbers) or '(no such collective)'}")
    return {"coll_tuned_use_dynamic_rules": "1", f"coll_tuned_{collective}_algorithm": str(numbers[algorithm])}


def parse_version(text: str) -> str | None:
    """The version in ``ompi_info --version``'s (or ``mpirun --version``'s) output.

    >>> parse_version("Open MPI v4.1.4\\n\\nhttp://www.open-mpi.org/community/help/")
    '4.1.4'
    >>> parse_version("mpirun (Open MPI) 5.0.3") , parse_version("nothing")
    ('5.0.3', None)
    """
    import re

    m = re.search(r"(\d+\.\d+\.\d+)", text)
    return m.group(1) if m else None


def check_version(installed: str | None) -> None:
    """Refuse an Open MPI whose coll/tuned decisions may differ from :data:`TABLE_VERSION`'s
    (another minor release), in one line: "the default algorithm" would be a guess.

    >>> check_version("4.1.6")
    >>> check_version("5.0.3")
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: <open-mpi>: version: coll/tuned's decision table here is 4.1.4's; another minor release decides differently (got '5.0.3')
    """
    if installed is None:
        raise ConfigError("<open-mpi>", "version", None, "cannot read it (is openmpi-bin installed? make setup)")
    if installed.split(".")[:2] != TABLE_VERSION.split(".")[:2]:
        raise ConfigError("<open-mpi>", "version", installed,
                          f"coll/tuned's decision table here is {TABLE_VERSION}'s; another minor release decides "
                          "differently")
