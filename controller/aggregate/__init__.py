"""In-network aggregation (SwitchML) on the rail switches: job files, slot pools, pure rule
compilation, install/remove/show over P4Runtime."""

from controller.aggregate.compile import (
    AggregationError,
    AggregationProgram,
    PoolExhausted,
    SwitchAggregation,
    allocate_pool,
    compile_aggregation,
    fresh_epoch,
    job_mgid,
)
from controller.aggregate.install import (
    AggregationConflict,
    InstalledJob,
    InstalledWorker,
    Removal,
    SwitchAggregationState,
    install_aggregation,
    installed_jobs,
    read_aggregation,
    remove_aggregation,
)
from controller.aggregate.job import (
    AggregationJob,
    RailGroup,
    ResolvedAggregation,
    ResolvedWorker,
    WorkerSpec,
    load_job,
    parse_job,
    resolve_job,
)

__all__ = [
    "AggregationConflict",
    "AggregationError",
    "AggregationJob",
    "AggregationProgram",
    "InstalledJob",
    "InstalledWorker",
    "PoolExhausted",
    "RailGroup",
    "Removal",
    "ResolvedAggregation",
    "ResolvedWorker",
    "SwitchAggregation",
    "SwitchAggregationState",
    "WorkerSpec",
    "allocate_pool",
    "compile_aggregation",
    "fresh_epoch",
    "install_aggregation",
    "installed_jobs",
    "job_mgid",
    "load_job",
    "parse_job",
    "read_aggregation",
    "remove_aggregation",
    "resolve_job",
]
