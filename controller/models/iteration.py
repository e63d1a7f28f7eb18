"""An analytical iteration-time model of Megatron-style LLM training on rail-only and fat-tree fabrics.

Placement follows Megatron-LM's rank order (tensor parallel fastest, then data/expert
parallel, then pipeline): a TP group sits inside one HB domain, and the GPUs that exchange
data-parallel gradients or pipeline activations sit at the same position of different HB
domains, hence on the same rail. Such traffic costs the same on both fabrics. Traffic between
different rails (the MoE all-to-all, or a pipeline whose stages are not rail-aligned) goes
directly on a fat-tree, and on a rail-only network it is first forwarded over NVLink
(:func:`~controller.models.collectives.alltoall_hierarchical_time`).

Per micro-batch and pipeline stage, a GPU spends
``compute + TP all-reduces (NVLink) + MoE all-to-alls + pipeline sends``; a 1F1B pipeline runs
``m + p - 1`` such slots (``m`` micro-batches, ``p`` stages, the ``p - 1`` being the bubble),
and the data-parallel gradient all-reduce follows, exposed except for ``dp_overlap``.
Compute is FLOPs / (peak x efficiency); FLOPs per token reduce to Megatron's
``96 B s l h^2 (1 + s/6h + V/16lh)`` for a dense GPT with activation recomputation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from controller.models import collectives as co

__all__ = [
    "DEFAULT_HARDWARE",
    "FABRICS",
    "Hardware",
    "IterationTime",
    "LLMConfig",
    "Parallelism",
    "iteration_time",
    "megatron_flops",
    "moe_alltoall_overhead",
    "six_nd_flops",
]

Fabric = Literal["rail-only", "fat-tree"]
FABRICS: tuple[Fabric, ...] = ("rail-only", "fat-tree")


@dataclass(frozen=True)
class LLMConfig:
    """A decoder-only transformer; ``experts > 1`` makes ``moe_layer_fraction`` of its FFNs MoE."""

    name: str
    layers: int
    hidden: int
    seq_len: int
    vocab: int
    ffn_hidden: int
    ffn_matrices: int = 2          # 2: GELU MLP, 3: SwiGLU
    kv_fraction: float = 1.0       # key/value heads over query heads (GQA < 1)
    experts: int = 1
    top_k: int = 1
    moe_layer_fraction: float = 1.0

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts."""
        return round(self.layers * self.moe_layer_fraction) if self.is_moe else 0

    @property
    def attention_params_per_layer(self) -> float:
        return (2 + 2 * self.kv_fraction) * self.hidden**2

    @property
    def ffn_params_per_expert(self) -> float:
        return self.ffn_matrices * self.hidden * self.ffn_hidden

    @property
    def expert_params(self) -> float:
        """Parameters in MoE FFNs (sharded by expert parallelism)."""
        return self.moe_layers * self.experts * self.ffn_params_per_expert

    @property
    def params(self) -> float:
        """All weights (attention, FFNs, embedding); norms and biases are left out."""
        dense_ffn = (self.layers - self.moe_layers) * self.ffn_params_per_expert
        return self.layers * self.attention_params_per_layer + dense_ffn + self.expert_params + self.vocab * self.hidden

    def forward_flops_per_token(self) -> tuple[float, float]:
        """(transformer layers, output logits) forward FLOPs per token; MoE FFNs run ``top_k`` experts."""
        h = self.hidden
        attention = 2 * self.attention_params_per_layer + 4 * self.seq_len * h
        ffn = 2 * self.ffn_params_per_expert
        layers = self.layers * (attention + ffn) + self.moe_layers * (self.top_k - 1) * ffn
        return layers, 2 * h * self.vocab

    def train_flops_per_token(self, recompute: bool = True) -> float:
        """Forward + backward (2x) FLOPs per token, + one more layer forward with recomputation."""
        layers, logits = self.forward_flops_per_token()
        return (4 if recompute else 3) * layers + 3 * logits


@dataclass(frozen=True)
class Parallelism:
    """How a job is split: ``tp * pp * dp`` GPUs; ``ep`` (experts) divides ``dp``."""

    tp: int
    pp: int
    dp: int
    global_batch: int
    micro_batch: int = 1
    ep: int = 1
    recompute: bool = True
    dp_overlap: float = 0.0

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.dp * self.micro_batch)


@dataclass(frozen=True)
class Hardware:
    """GPU and link speeds. Defaults: an H100 SXM DGX server with one 400G NIC per GPU.

    ``peak_tflops`` 989 is H100 SXM dense BF16; ``efficiency`` 0.5 is about the 52% of peak
    Megatron-LM reached on A100s (Narayanan et al., SC'21); ``nvlink_GBps`` 450 is NVLink 4's
    900 GB/s counted per direction; ``nic_gbps`` 400 is ConnectX-7.
    """

    peak_tflops: float = 989.0
    efficiency: float = 0.5
    nvlink_GBps: float = 450.0
    nic_gbps: float = 400.0
    hb_domain: int = 8
    bytes_per_value: int = 2       # BF16 activations
    grad_bytes: int = 2            # BF16 gradient all-reduce
    nvlink_latency_s: float = 0.0
    nic_latency_s: float = 0.0

    @property
    def flops(self) -> float:
        return self.peak_tflops * 1e12 * self.efficiency

    @property
    def nvlink_Bps(self) -> float:
        return self.nvlink_GBps * 1e9

    @property
    def nic_Bps(self) -> float:
        return self.nic_gbps * 1e9 / 8


#: The default :class:`Hardware` (H100 DGX, 400G NICs).
DEFAULT_HARDWARE = Hardware()


@dataclass(frozen=True)
class IterationTime:
    """Seconds per training iteration, by component (``compute`` includes the bubble)."""

    model: str
    fabric: Fabric
    gpus: int
    compute_s: float
    bubble_s: float
    tp_s: float
    pp_s: float
    moe_s: float
    dp_s: float

    @property
    def total_s(self) -> float:
        return self.compute_s + self.tp_s + self.pp_s + self.moe_s + self.dp_s

    @property
    def comm_s(self) -> float:
        return self.total_s - self.compute_s


def megatron_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int, recompute: bool = True) -> float:
    """FLOPs of one iteration of a GPT (Narayanan et al. 2021, eq. 3).

    ``96 B s l h^2 (1 + s/6h + V/16lh)`` with recomputation, ``72 B s l h^2 (1 + s/6h + V/12lh)``
    without.

    >>> f"{megatron_flops(1536, 2048, 96, 12288, 51200):.3e}"
    '4.511e+18'
    """
    b, s, n, h, v = batch, seq, layers, hidden, vocab
    if recompute:
        return 96 * b * s * n * h**2 * (1 + s / (6 * h) + v / (16 * n * h))
    return 72 * b * s * n * h**2 * (1 + s / (6 * h) + v / (12 * n * h))


def six_nd_flops(params: float, tokens: float) -> float:
    """The ``6 N D`` rule: training FLOPs of ``params`` weights over ``tokens`` tokens.

    >>> six_nd_flops(175e9, 1536 * 2048) / 1e18
    3.3030144
    """
    return 6 * params * tokens


def _members_per_domain(size: int, stride: int, hb_domain: int) -> int:
    """Members of a group of ``size`` GPUs spaced ``stride`` ranks apart that share an HB domain.

    Groups that split unevenly over domains get the smallest even share (``gcd``), which
    puts more of the reduction on the NICs: a conservative choice.
    """
    if stride >= hb_domain or hb_domain % stride:
        return 1
    return math.gcd(size, hb_domain // stride)


def _validate(model: LLMConfig, par: Parallelism, hw: Hardware) -> None:
    problems = []
    if hw.hb_domain % par.tp:
        problems.append(f"tp ({par.tp}) must divide the HB domain ({hw.hb_domain}): TP stays on NVLink")
    if model.layers % par.pp:
        problems.append(f"pp ({par.pp}) must divide layers ({model.layers})")
    if par.dp % par.ep:
        problems.append(f"ep ({par.ep}) must divide dp ({par.dp})")
    if model.is_moe and model.experts % par.ep:
        problems.append(f"ep ({par.ep}) must divide experts ({model.experts})")
    if par.global_batch % (par.dp * par.micro_batch):
        problems.append(f"global batch ({par.global_batch}) must be a multiple of dp x micro batch")
    if not 0.0 <= par.dp_overlap <= 1.0:
        problems.append(f"dp_overlap ({par.dp_overlap}) must be in [0, 1]")
    if problems:
        raise ValueError("; ".join(problems))


def _alltoall(fabric: Fabric, size: float, group: int, per_domain: int, hw: Hardware) -> float:
    fn = co.alltoall_hierarchical_time if fabric == "rail-only" else co.alltoall_direct_time
    return fn(size, group, per_domain, hw.nvlink_Bps, hw.nic_Bps, hw.nvlink_latency_s, hw.nic_latency_s)


def _stage_send(fabric: Fabric, size: float, par: Parallelism, hw: Hardware) -> float:
    """One activation (or gradient) transfer between adjacent pipeline stages."""
    if par.pp == 1:
        return 0.0
    distance = par.tp * par.dp  # rank offset of the same GPU in the next stage
    if distance % hw.hb_domain == 0:  # same rail, another domain
        return co.p2p_time(size, hw.nic_Bps, hw.nic_latency_s)
    # partners at different positions: cross-rail (or a mix of NVLink and cross-rail partners)
    nic = co.p2p_time(size, hw.nic_Bps, hw.nic_latency_s)
    if fabric == "rail-only":
        return co.p2p_time(size, hw.nvlink_Bps, hw.nvlink_latency_s) + nic
    return nic


def _allreduce(size: float, group: int, stride: int, hw: Hardware) -> float:
    per_domain = _members_per_domain(group, stride, hw.hb_domain)
    return co.hierarchical_allreduce_time(size, per_domain, group // per_domain, hw.nvlink_Bps,
                                          hw.nic_Bps, hw.nvlink_latency_s, hw.nic_latency_s)


def iteration_time(model: LLMConfig, par: Parallelism, hw: Hardware = DEFAULT_HARDWARE,
                   fabric: Fabric = "rail-only") -> IterationTime:
    """Seconds per iteration of ``model`` split as ``par`` on ``hw``, on ``fabric``.

    Examples
    --------
    >>> m = LLMConfig("tiny", layers=2, hidden=1024, seq_len=1024, vocab=1000, ffn_hidden=4096)
    >>> p = Parallelism(tp=8, pp=1, dp=2, global_batch=2)
    >>> t = iteration_time(m, p)
    >>> t.total_s == iteration_time(m, p, fabric="fat-tree").total_s
    True
    """
    if fabric not in FABRICS:
        raise ValueError(f"fabric must be one of {FABRICS} (got {fabric!r})")
    _validate(model, par, hw)
    b, s, h, t = par.micro_batch, model.seq_len, model.hidden, par.tp
    slots = par.micro_batches + par.pp - 1
    fwd_passes = 2 if par.recompute else 1  # forward, and forward again during backward

    layer_fwd, logits_fwd = model.forward_flops_per_token()
    fwd_flops = (layer_fwd + logits_fwd) * b * s / (t * par.pp)
    bwd_flops = (2 * (layer_fwd + logits_fwd) + (fwd_passes - 1) * layer_fwd) * b * s / (t * par.pp)
    compute_slot = (fwd_flops + bwd_flops) / hw.flops

    activation = b * s * h * hw.bytes_per_value
    layers_stage = model.layers // par.pp
    tp_ar = co.ring_allreduce_time(activation, t, hw.nvlink_Bps, hw.nvlink_latency_s) if t > 1 else 0.0
    tp_slot = layers_stage * (2 * fwd_passes + 2) * tp_ar  # 2 per layer per pass (attention, MLP)

    moe_slot = 0.0
    if model.is_moe and par.ep > 1:
        dispatch = activation / t * model.top_k  # tokens split over TP ranks (sequence parallel)
        per_domain = _members_per_domain(par.ep, t, hw.hb_domain)
        a2a = _alltoall(fabric, dispatch, par.ep, per_domain, hw)
        moe_layers_stage = model.moe_layers / par.pp
        moe_slot = moe_layers_stage * 2 * (fwd_passes + 1) * a2a  # dispatch + combine per pass

    pp_slot = 2 * _stage_send(fabric, activation / t, par, hw)  # forward send + backward send

    dense_grads = (model.params - model.expert_params) / (t * par.pp) * hw.grad_bytes
    dp_time = _allreduce(dense_grads, par.dp, t, hw) if par.dp > 1 else 0.0
    if model.is_moe and par.dp // par.ep > 1:
        expert_grads = model.expert_params / (t * par.pp * par.ep) * hw.grad_bytes
        dp_time += _allreduce(expert_grads, par.dp // par.ep, t * par.ep, hw)

    return IterationTime(
        model=model.name, fabric=fabric, gpus=par.gpus,
        compute_s=slots * compute_slot, bubble_s=(par.pp - 1) * compute_slot,
        tp_s=slots * tp_slot, pp_s=slots * pp_slot, moe_s=slots * moe_slot,
        dp_s=(1.0 - par.dp_overlap) * dp_time,
    )


def moe_alltoall_overhead(model: LLMConfig, par: Parallelism, hw: Hardware = DEFAULT_HARDWARE) -> tuple[float, float]:
    """(all-to-all time, iteration time) overhead of rail-only over the fat-tree, as fractions."""
    ro = iteration_time(model, par, hw, "rail-only")
    ft = iteration_time(model, par, hw, "fat-tree")
    a2a = 0.0 if ft.moe_s == 0 else ro.moe_s / ft.moe_s - 1.0
    return a2a, ro.total_s / ft.total_s - 1.0
