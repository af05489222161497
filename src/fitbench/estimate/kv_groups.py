"""vLLM V1's hybrid KV cache: how a model with window layers shares the block pool.

Why: Gemma-2/3, gpt-oss, Mistral-7B v0.1, Cohere2 and Llama-4 attend to a sliding window (or a
local chunk) in some or all layers. vLLM's V1 engine (vllm/v1/core/kv_cache_utils.py, the hybrid
KV cache manager, default since 0.10) keeps only the blocks a window layer can still read, but
to do so it groups the layers, and the grouping changes both figures its startup log prints:

* layers of one kind are split into groups of `layers_per_group` layers: the smaller kind's
  count, or the larger's where that is under 1.5 times the smaller (gpt-oss: 12 + 12; Gemma-3
  27B: 10 full, 52 window layers, so 6 window groups of 10 with 8 padding layers);
* the pool holds num_blocks = available // (block bytes of one layer x layers_per_group); every
  group draws its blocks from it;
* "GPU KV cache size" = num_blocks // groups x block_size;
* a request of L tokens needs ceil(L / block) blocks in each full group and, in each window
  group, ceil(min(window - 1 + max_num_batched_tokens, L) / block) + 1 (SlidingWindowSpec) or
  ceil(min(chunk + max_num_batched_tokens, L) / block) (ChunkedLocalAttentionSpec, Llama-4);
  "Maximum concurrency" = num_blocks / those blocks.

So a short context gains nothing (a window group still holds the whole admitted prompt, and the
padding layers cost memory), while a long one frees most of the window layers' blocks. The V0
engine and models without windows keep one group of all layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fitbench.workloads.arch import TransformerArch

# transformers families whose window layers are Llama-4's aligned local chunks, not a rolling window
CHUNKED_ATTENTION_TYPES = ("llama4_text",)
# vLLM keeps the larger kind's count as the group size below this ratio of the counts
GROUP_SIZE_RATIO = 1.5


@dataclass(frozen=True)
class KvGroups:
    """The KV cache groups vLLM forms for one model (per GPU: every GPU holds every layer)."""

    layers_per_group: int
    full_groups: int
    window_groups: int
    window: int
    chunked: bool

    @property
    def groups(self) -> int:
        return self.full_groups + self.window_groups

    def window_blocks(self, tokens: int, block_size: int, batched_tokens: int) -> int:
        """Blocks one window group holds for a request of `tokens` tokens (vLLM's admission cap)."""
        if self.chunked:
            return math.ceil(min(self.window + batched_tokens, tokens) / block_size)
        return math.ceil(min(self.window - 1 + batched_tokens, tokens) / block_size) + 1

    def blocks_per_request(self, tokens: int, block_size: int, batched_tokens: int) -> int:
        full = self.full_groups * math.ceil(tokens / block_size)
        return full + self.window_groups * self.window_blocks(tokens, block_size, batched_tokens)


def kv_groups(arch: TransformerArch, engine: str) -> KvGroups | None:
    """The groups of a model with window layers under a V1 engine; None: one group of all layers
    (no windows, or the V0 engine, which allocates every layer for the whole sequence)."""
    if engine == "v0" or not arch.sliding_layers or not arch.sliding_window:
        return None
    window_layers = arch.sliding_layers
    full_layers = arch.num_layers - window_layers
    chunked = arch.rules_type in CHUNKED_ATTENTION_TYPES
    if not full_layers:  # one kind of layer: one group of all of them
        return KvGroups(arch.num_layers, 0, 1, arch.sliding_window, chunked)
    fewest, most = min(full_layers, window_layers), max(full_layers, window_layers)
    size = most if most < GROUP_SIZE_RATIO * fewest else fewest
    return KvGroups(
        layers_per_group=size,
        full_groups=math.ceil(full_layers / size),
        window_groups=math.ceil(window_layers / size),
        window=arch.sliding_window,
        chunked=chunked,
    )
