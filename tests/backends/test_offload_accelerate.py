"""fitbench's offload placement against accelerate's own infer_auto_device_map (the real code,
on a meta-device Llama: no weights are created), for several memory caps."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "offload_gpu.py"
_spec = importlib.util.spec_from_file_location("offload_gpu", SCRIPT)
assert _spec and _spec.loader
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

MiB = 2**20


def _accelerate_layers_on_main(cfg: dict[str, int], cap: int) -> int:
    from accelerate import infer_auto_device_map, init_empty_weights

    config = transformers.LlamaConfig(**cfg, max_position_embeddings=8192, tie_word_embeddings=False)
    with init_empty_weights():
        model = transformers.LlamaForCausalLM(config).to(torch.float16)
    device_map = infer_auto_device_map(
        model, max_memory={"cpu": cap}, dtype=torch.float16, no_split_module_classes=["LlamaDecoderLayer"]
    )
    if device_map.get("") == "cpu":  # everything on the main device: a one-entry map
        return cfg["num_hidden_layers"]
    return sum(1 for k, v in device_map.items() if k.startswith("model.layers.") and v == "cpu")


@pytest.mark.slow
@pytest.mark.parametrize("cap_mib", [4, 6, 9, 12, 16])
def test_layers_on_the_main_device_match_accelerate(cap_mib: int) -> None:
    cfg = bench.TINY
    est = bench.fitbench_offload(cfg, "h200", cap_mib * MiB, 8, 4)
    # Where everything fits fitbench has nothing to offload: every layer is on the main device.
    ours = est["gpu_layers"] if est["verdict"] == "offload" else cfg["num_hidden_layers"]
    assert ours == _accelerate_layers_on_main(cfg, cap_mib * MiB)
