"""Named model configurations and parallelization plans for the iteration-time model.

Architectures follow the published papers and model cards; the parallelization plans are
Megatron-style choices made here (TP inside the 8-GPU HB domain, PP and DP across domains),
not taken from the Rail-only paper.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from controller.models.iteration import LLMConfig, Parallelism

__all__ = ["PRESETS", "preset"]

_GPT3_175B = LLMConfig("gpt3-175b", layers=96, hidden=12288, seq_len=2048, vocab=51200, ffn_hidden=4 * 12288)
_GPT3_13B = LLMConfig("gpt3-13b", layers=40, hidden=5120, seq_len=2048, vocab=51200, ffn_hidden=4 * 5120)
_LLAMA2_70B = LLMConfig("llama2-70b", layers=80, hidden=8192, seq_len=4096, vocab=32000, ffn_hidden=28672,
                        ffn_matrices=3, kv_fraction=8 / 64)
_MIXTRAL_8X7B = LLMConfig("mixtral-8x7b", layers=32, hidden=4096, seq_len=4096, vocab=32000, ffn_hidden=14336,
                          ffn_matrices=3, kv_fraction=8 / 32, experts=8, top_k=2)
_GSHARD_64E = LLMConfig("gshard-like-64e", layers=40, hidden=5120, seq_len=2048, vocab=51200,
                        ffn_hidden=4 * 5120, experts=64, top_k=2, moe_layer_fraction=0.5)

#: name -> (model, parallelization). GPU counts: 1024, 256, 1024, 256, 512.
PRESETS: Mapping[str, tuple[LLMConfig, Parallelism]] = MappingProxyType({
    # GPT-3 175B (Brown et al. 2020) as in Megatron-LM's 1024-GPU run (Narayanan et al. 2021).
    "gpt3-175b": (_GPT3_175B, Parallelism(tp=8, pp=8, dp=16, global_batch=1536)),
    # GPT-3 13B; TP 4 leaves two DP ranks per HB domain (hierarchical all-reduce).
    "gpt3-13b": (_GPT3_13B, Parallelism(tp=4, pp=1, dp=64, global_batch=1024)),
    # Llama-2 70B (Touvron et al. 2023): GQA with 8 KV heads, SwiGLU, 4M-token batches.
    "llama2-70b": (_LLAMA2_70B, Parallelism(tp=8, pp=4, dp=32, global_batch=1024)),
    # Mixtral 8x7B (Jiang et al. 2024): 8 experts, top-2; EP 8 spans two HB domains.
    "mixtral-8x7b": (_MIXTRAL_8X7B, Parallelism(tp=2, pp=4, dp=32, ep=8, global_batch=1024)),
    # GShard-style: MoE every other layer, 64 experts, top-2; EP 64 spans eight HB domains.
    "gshard-like-64e": (_GSHARD_64E, Parallelism(tp=1, pp=1, dp=512, ep=64, global_batch=2048)),
})


def preset(name: str) -> tuple[LLMConfig, Parallelism]:
    """The named (model, parallelism) pair.

    >>> preset("gpt3-175b")[1].gpus
    1024
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown model preset {name!r} (one of {', '.join(PRESETS)})") from None
