"""Checkmate gradient mirroring on the packet switches: job files, pure rule compilation,
install/remove/show over P4Runtime."""

from controller.mirror.compile import MirrorLeg, MirrorProgram, SwitchMirror, compile_mirror
from controller.mirror.install import (
    MirrorConflict,
    MirrorRow,
    install_mirror,
    read_mirror,
    remove_mirror,
)
from controller.mirror.job import JobSpec, ResolvedJob, WorkerSpec, load_job, parse_job, resolve_job

__all__ = [
    "JobSpec",
    "MirrorConflict",
    "MirrorLeg",
    "MirrorProgram",
    "MirrorRow",
    "ResolvedJob",
    "SwitchMirror",
    "WorkerSpec",
    "compile_mirror",
    "install_mirror",
    "load_job",
    "parse_job",
    "read_mirror",
    "remove_mirror",
    "resolve_job",
]
