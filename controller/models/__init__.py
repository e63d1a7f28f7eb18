"""Analytical models of the Rail-only paper (Wang et al., HOTI 2024, arXiv 2307.12169).

* :mod:`~controller.models.cost`: switches, links, transceivers, cost and power of a rail-only
  network and of a rail-optimized fat-tree.
* :mod:`~controller.models.params`: strict loading of the component price/power file.
* :mod:`~controller.models.collectives`: alpha-beta times of ring, hierarchical and
  all-to-all collectives.
* :mod:`~controller.models.iteration`: a Megatron-style iteration-time model per fabric.
* :mod:`~controller.models.presets`: named LLM configurations.
* :mod:`~controller.models.report`: tables and PNG plots (the only module that writes files).
"""

from controller.models.collectives import (
    alltoall_direct_time,
    alltoall_hierarchical_time,
    alltoall_overhead,
    hierarchical_allreduce_time,
    p2p_time,
    ring_allgather_time,
    ring_allreduce_time,
    ring_reduce_scatter_time,
)
from controller.models.cost import (
    ClusterSpec,
    Comparison,
    ComponentCosts,
    FabricBill,
    clos_tiers,
    compare,
    fat_tree_bill,
    rail_only_bill,
    savings,
)
from controller.models.iteration import (
    DEFAULT_HARDWARE,
    FABRICS,
    Hardware,
    IterationTime,
    LLMConfig,
    Parallelism,
    iteration_time,
    megatron_flops,
    moe_alltoall_overhead,
    six_nd_flops,
)
from controller.models.params import (
    DEFAULT_COST_FILE,
    CostParams,
    load_cost_params,
    parse_cost_params,
)
from controller.models.presets import PRESETS, preset

__all__ = [
    "DEFAULT_COST_FILE",
    "DEFAULT_HARDWARE",
    "FABRICS",
    "PRESETS",
    "ClusterSpec",
    "Comparison",
    "ComponentCosts",
    "CostParams",
    "FabricBill",
    "Hardware",
    "IterationTime",
    "LLMConfig",
    "Parallelism",
    "alltoall_direct_time",
    "alltoall_hierarchical_time",
    "alltoall_overhead",
    "clos_tiers",
    "compare",
    "fat_tree_bill",
    "hierarchical_allreduce_time",
    "iteration_time",
    "load_cost_params",
    "megatron_flops",
    "moe_alltoall_overhead",
    "p2p_time",
    "parse_cost_params",
    "preset",
    "rail_only_bill",
    "ring_allgather_time",
    "ring_allreduce_time",
    "ring_reduce_scatter_time",
    "savings",
    "six_nd_flops",
]
