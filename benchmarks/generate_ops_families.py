"""Host calls of an eager `generate` decode step, counted per family of the model library.

estimate/generate_ops.py counts a decode step's Python-level torch calls from the Llama family's
modelling code, part by part (attention block, rotary, norms, MLP or experts); other families
have other block code. This script counts what transformers really issues for one tiny model of
each family in the library (benchmarks/tiny_families.py: the bundled config at tiny sizes), with
the attention implementation fitbench's torch backend picks, and prints beside each layer's
count the part-by-part count and the difference: the family's own calls that
`generate_ops.CallCounts.family_layer` holds for the installed release.

How a layer is counted: the decode forward of models of 0..3 layers (the prompt first, then one
token over the cache); the difference between L and L - 1 layers is layer L - 1, dense or MoE as
the family lays it out (layers 1 and 2 are used: the first layer's difference also holds the mask
work a model without layers skips). The calls outside the layers come from `generate` itself (N
and N + k new tokens) less the layers.

    python benchmarks/generate_ops_families.py            # every family (~1 min on a CPU)
    python benchmarks/generate_ops_families.py --only falcon,deepseek

With PYTHONPATH pointing at another transformers release first, it counts that release (the H200
reference stack's 5.17: benchmarks/results/generate-ops-families-transformers-5.17.txt).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch
import transformers
from torch.overrides import TorchFunctionMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fitbench.estimate import generate_ops
from fitbench.estimate.execution import transformers_lacks_sdpa
from fitbench.workloads import library
from fitbench.workloads.hf_config import arch_from_hf_config
from fitbench.workloads.multimodal import WRAPPERS
from tiny_families import nemotron_h_has_experts, tiny_config

BATCH, PROMPT, LAYERS = 2, 16, 3
WINDOW = 64


class CallCounter(TorchFunctionMode):
    """Python-level torch calls, less attribute reads (generate_ops says why)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") != "__get__":
            self.calls += 1
        return func(*args, **(kwargs or {}))


def families() -> dict[str, str]:
    """One library model per text model type (the first in the library's order), then one layout
    of benchmarks/configs/ for each decoder family no bundled model has."""
    chosen: dict[str, str] = {}
    layouts = sorted(p.name for p in (Path(__file__).resolve().parent / "configs").glob("*.json"))
    for name in [*library.models(), *layouts]:
        try:
            config = tiny_config(name)
            arch = arch_from_hf_config(config)
        except Exception:  # a config fitbench refuses is not counted here
            continue
        if name in layouts and config.get("model_type") in WRAPPERS:
            continue  # a multimodal layout's text type (glm4v_text) has no causal-LM class to build
        if getattr(arch, "kind", "") == "decoder":
            chosen.setdefault(arch.model_type, name)
    return chosen


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's keys of a multimodal file (its text_config), else the config."""
    text = config.get("text_config")
    return dict(text) if isinstance(text, dict) else config


def model_type_of(fields: dict[str, Any]) -> str:
    return str(fields.get("model_type", "")).replace("-", "_")


def nemotron_h_pattern(fields: dict[str, Any], layers: int) -> str:
    """Nemotron-H's blocks for `layers` layers of a mixer block and an MLP (or experts) block each:
    the first mixer attends, the others are Mamba-2 ones, as tiny_config's kinds."""
    mlp = "E" if nemotron_h_has_experts(fields) else "-"
    return ("*" + mlp + ("M" + mlp) * layers)[: 2 * layers]


def build(config: dict[str, Any], layers: int) -> Any:
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = {**_text_config(config), "num_hidden_layers": layers}
    fields.pop("auto_map", None)
    if "n_group" in fields:  # DeepSeek-style grouped routing: a tiny expert count is one group
        fields |= {"n_group": 1, "topk_group": 1}
    dense = fields.get("first_k_dense_replace")
    if model_type_of(fields) == "glm4_moe_lite" and dense is not None:
        # GLM-4.7-Flash's class lists its dense layers in mlp_layer_types (as the torch backend
        # writes them) and would leave first_k_dense_replace unread
        fields["mlp_layer_types"] = ["dense"] * min(dense, layers) + ["sparse"] * max(layers - dense, 0)
    if fields.get("linear_num_value_heads"):  # Qwen3.5 / Qwen3-Next: the first layer attends
        fields.pop("full_attention_interval", None)
        fields["layer_types"] = (["full_attention"] + ["linear_attention"] * layers)[:layers]
    if model_type_of(fields) == "lfm2_moe":  # LFM2-MoE: the first layer attends, the rest convolve
        fields["layer_types"] = (["full_attention"] + ["conv"] * layers)[:layers]
    if isinstance(fields.get("layer_types"), list) and "mamba_n_heads" in fields:
        # Granite 4.0: the first layer attends, the others keep tiny_config's kind
        kinds = fields["layer_types"]
        fields["layer_types"] = (kinds[:1] + kinds[1:2] * layers)[:layers]
    if model_type_of(fields) == "nemotron_h":
        fields["hybrid_override_pattern"] = nemotron_h_pattern(fields, layers)
        fields.pop("layers_block_type", None)
    if fields.get("kv_lora_rank"):  # latent attention keeps a key and value head per query head
        fields["num_key_value_heads"] = fields["num_attention_heads"]
    model_type = fields.pop("model_type")
    cfg = AutoConfig.for_model(model_type, **fields)
    if getattr(cfg, "pad_token_id", None) is not None and cfg.pad_token_id >= cfg.vocab_size:
        cfg.pad_token_id = 0
    eager = transformers_lacks_sdpa(arch_from_hf_config(config), transformers.__version__)
    cfg._attn_implementation = "eager" if eager else "sdpa"  # as the torch backend asks
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg).eval()


def vocab(model: Any) -> int:
    return int(model.config.vocab_size)


def forward_calls(model: Any) -> int:
    from transformers import DynamicCache

    ids = torch.randint(3, vocab(model), (BATCH, PROMPT))
    cache = DynamicCache(config=model.config)
    nxt = ids[:, -1:]
    mask = torch.ones(BATCH, PROMPT + 1, dtype=torch.long)
    pos = torch.tensor([PROMPT])
    with torch.no_grad():
        model(ids, past_key_values=cache, use_cache=True)
        with CallCounter() as counter:
            model(nxt, past_key_values=cache, attention_mask=mask, cache_position=pos, use_cache=True)
    return counter.calls


def generate_calls(model: Any, new: int) -> int:
    ids = torch.randint(3, vocab(model), (BATCH, PROMPT))
    mask = torch.ones_like(ids)
    with torch.no_grad(), CallCounter() as counter:
        model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            eos_token_id=2,
            pad_token_id=0,
        )
    return counter.calls


# Keys that put a family's first layers dense: set to 2, so that of LAYERS = 3 layers the second
# is dense and the third MoE (the first layer's count also holds the mask work a model with no
# layer skips, so it is not used).
DENSE_FIRST_KEYS = ("first_k_dense_replace", "moe_layer_start_index", "num_dense_layers")


def count(name: str) -> dict[str, Any]:
    """Real and part-by-part calls of layers 1 and 2 of a 3-layer tiny model, and outside them."""
    config = tiny_config(name)
    text = _text_config(config)
    for key in DENSE_FIRST_KEYS:
        if key in text:
            text[key] = 2
    if text.get("sliding_window"):  # beyond every counted context: no step crosses the window
        text["sliding_window"] = WINDOW
    if model_type_of(text) == "nemotron_h":  # the blocks build() lays out: every layer has an MLP
        text["hybrid_override_pattern"] = nemotron_h_pattern(text, LAYERS)
    if text is not config:
        config = {**config, "text_config": text}
    arch = arch_from_hf_config(config)
    release = transformers.__version__
    forwards = [forward_calls(build(config, n)) for n in range(LAYERS + 1)]
    one = build(config, LAYERS)
    k = 4
    step = (generate_calls(one, 5 + k) - generate_calls(one, 5)) / k
    full = generate_ops.window_reached(arch, PROMPT)
    layers = []
    for i in range(1, LAYERS):
        sliding = i < arch.sliding_layers
        moe = arch.is_moe_layer(i)
        parts = generate_ops.layer_calls(
            arch, moe=moe, sliding=sliding, window_full=full, transformers=release
        )
        if arch.linear_layers:  # build() makes every layer after the first a linear-attention one
            parts += generate_ops.linear_layer_extra_calls(arch, release)
        layers.append({"real": forwards[i + 1] - forwards[i], "parts": parts, "moe": moe})
    real_fixed = step - (forwards[-1] - forwards[0])
    deltas = {}
    for kind in (False, True):
        diffs = [layer["real"] - layer["parts"] for layer in layers if layer["moe"] is kind]
        if diffs:
            deltas["moe" if kind else "dense"] = round(sum(diffs) / len(diffs))
    return {
        "name": name,
        "model_type": arch.model_type,
        "layers": layers,
        "deltas": deltas,
        "fixed_real": real_fixed,
        "fixed_estimate": generate_ops.fixed_calls(arch, PROMPT + 5, release),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated parts of model types or names")
    args = parser.parse_args(argv)
    wanted = [w for w in (args.only or "").split(",") if w]
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    print(f"{'model type':16} {'model':34} layers 1, 2: real / parts (diff), MoE *   fixed: real / parts")
    dense: dict[str, int] = {}
    moe: dict[str, int] = {}
    fixed: dict[str, int] = {}
    for model_type, name in sorted(families().items()):
        if wanted and not any(w in model_type or w in name for w in wanted):
            continue
        try:
            row = count(name)
        except Exception as exc:  # a family this release cannot build is a line, not a stop
            print(f"{model_type:16} {name:34} not counted: {str(exc).splitlines()[0][:90]}")
            continue
        cells = " ".join(
            f"{layer['real']}/{layer['parts']}({layer['real'] - layer['parts']:+d})" + "*" * layer["moe"]
            for layer in row["layers"]
        )
        print(f"{model_type:16} {name:34} {cells:36} {row['fixed_real']:.1f} / {row['fixed_estimate']}")
        if row["deltas"].get("dense"):
            dense[model_type] = row["deltas"]["dense"]
        if row["deltas"].get("moe"):
            moe[model_type] = row["deltas"]["moe"]
        extra = round(row["fixed_real"] - row["fixed_estimate"])
        if extra:
            fixed[model_type] = extra
    print("\nthe family's own calls beside the parts (generate_ops.CallCounts):")
    print(f"family_layer={dense}")
    print(f"family_moe_layer={moe}")
    print(f"family_fixed (beyond the set's current ones)={fixed}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
