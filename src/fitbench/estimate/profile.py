"""Efficiency profiles: the estimator's only tunable constants, stored as data with provenance."""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, fields, replace
from functools import cache
from pathlib import Path

from fitbench.errors import FitbenchError, unknown_name

BUILTIN = Path(__file__).with_name("profiles.toml")
# Fractions of a datasheet peak, and causal attention's reference length: the speed model
# divides by them, so none may be 0.
_EFFICIENCIES = (
    "matmul_efficiency",
    "conv_efficiency",
    "attention_efficiency",
    "causal_attention_reference_keys",
    "memory_efficiency",
    "decode_memory_efficiency",
    "decode_compiled_memory_efficiency",
    "decode_fused_batched_memory_efficiency",
    "bn_native_nchw_efficiency",
)
# Execution modes a framework runs with another mode's table, and why. Paddle's `tuned` changes
# what runs (AMP O2 precision, which fitbench.estimate.execution applies to the workload, and
# multi-tensor Adam/Momentum updates: fitbench.backends.paddle.session) but still launches every
# kernel eagerly from Python like `default` (no CUDA graphs, no paddle.jit.to_static), so default's
# efficiencies and host costs are the honest ones; the reason travels in the profile's
# provenance, which the estimate's assumptions quote.
SHARED_TABLES: dict[tuple[str, str], tuple[str, str]] = {
    ("paddle", "tuned"): (
        "default",
        "Paddle's default profile (its tuned mode changes the precision to AMP O2 and the optimizer "
        "to a multi-tensor update, but launches kernels eagerly like default, so default's "
        "efficiencies and host costs apply)",
    ),
}


@dataclass(frozen=True, kw_only=True)
class Profile:
    """How efficiently one framework in one execution mode uses a GPU (see profiles.toml)."""

    framework: str
    exec_mode: str
    matmul_efficiency: float
    conv_efficiency: float
    attention_efficiency: float
    memory_efficiency: float
    kernel_floor_seconds: float
    # A memory-bound kernel's fixed GPU time (launch, ramp-up, tail) beside its bytes at the
    # streaming bandwidth; independent of the card's bandwidth.
    kernel_fixed_seconds: float = 0.0
    # The same for a generation's decode step, where a mode runs kernels of its own for it
    # (torch.tuned's fused or compiled kernels, whose launches the eager operation counts do not
    # follow); None: kernel_fixed_seconds.
    decode_kernel_fixed_seconds: float | None = None
    # The largest batch whose decode step runs the mode's own fused kernels, with the pointwise
    # work (norms, rotary, cache stores, residual adds, the activation) inside the weight GEMVs
    # (torch.tuned: backends/torch/fused_decode.py); 0: none. Larger batches run the mode's other
    # decode step (compiled where fuses_pointwise).
    decode_fused_max_batch: int = 0
    # The mode's other decode step, above decode_fused_max_batch where that is not 0 (torch.tuned:
    # the compiled static-cache step of cuBLAS GEMMs): its bandwidth share (None: the decode
    # share), and the alignment its static KV cache's length is rounded up to, the slots its
    # attention reads every step whatever the position (0: the real context). Its small kernels
    # keep kernel_fixed_seconds: they are not the fused kernels decode_kernel_fixed_seconds
    # describes.
    decode_compiled_memory_efficiency: float | None = None
    decode_cache_align: int = 0
    # The fused step's bandwidth share at 2..decode_fused_max_batch sequences, where batched tiles
    # (tl.dot of every sequence's activations against one read of the weight tile) replace the
    # batch-1 GEMVs; None: the decode share.
    decode_fused_batched_memory_efficiency: float | None = None
    # The share of the streaming bandwidth the mode's own fused decode attention reaches on what
    # it reads (each query head its kv head's K and V), in two launches of kernel_fixed_seconds
    # (estimate/speed.py fused_attention); None: attention streams like the step's other kernels.
    decode_fused_attention_efficiency: float | None = None
    # A convolution pass's fixed GPU time per launch (forward, data and weight gradients) beside
    # its FLOPs at conv_efficiency: pipeline fill, epilogue and the last wave's tail.
    conv_fixed_seconds: float = 0.0
    # A GEMM's fixed GPU time per launch beside its FLOPs at matmul_efficiency: the pipeline's fill
    # and drain and the epilogue, which a short GEMM cannot amortize.
    matmul_fixed_seconds: float = 0.0
    # Fused attention's share of the peak falls with the head dimension below 128:
    # attention_efficiency x (head_dim / 128) ** this (estimate/speed.py attention_share); 0: flat.
    attention_head_dim_exponent: float = 0.0
    # Causal fused attention over a prefill's or training step's sequence s (Kernel.attended_keys)
    # reaches attention_efficiency at s = causal_attention_reference_keys and head_dim 128, and
    # s / (s + causal_attention_overhead_keys) of its limit at other sequences, times (head_dim /
    # 128) ** causal_attention_head_dim_exponent (speed.causal_attention_share); an overhead of 0:
    # attention_share at every sequence.
    causal_attention_overhead_keys: float = 0.0
    causal_attention_reference_keys: float = 2048.0
    causal_attention_head_dim_exponent: float = 0.0
    host_seconds_per_op: float
    generate_host_seconds_per_op: float
    context_bytes: int
    workspace_bytes: int
    fragmentation: float
    fragmentation_cnn: float
    overlap_loss: float
    # overlap_loss for a generation's prefill and decode steps where it differs: transformers'
    # generate reads its stopping check on the host every token, so each step ends in a wait
    # that a training step (no synchronisation inside) does not have; None: overlap_loss.
    generate_overlap_loss: float | None = None
    kv_growth_stale_share: float = 0.0
    # Whether the mode's generation grows each layer's 16-bit K and V by concatenation every decode
    # step (transformers' DynamicCache, fitbench's Paddle decoder), copying the whole cache beside
    # the attention's read (transformer_cost.cache_append_kernel); False: written in place.
    kv_cache_concat: bool = False
    # Whether the mode's latent-attention decode step re-expands each layer's whole cached latent
    # through kv_b_proj into per-head keys and values (transformers' DeepSeek-V2/V3 code:
    # transformer_cost.latent_expansion_kernels); False: MLA-aware kernels read the latent only.
    expands_latent_cache: bool = False
    # Whether the mode runs every expert on every token in the families whose transformers code
    # does (expert_cost.ALL_EXPERT_TYPES: Llama-4's repeat + bmm); False: the routed top-k
    # only, as engines' fused MoE kernels do.
    runs_all_experts: bool = False
    # Whether the mode's decode steps run routed experts through transformers' batched_mm path:
    # generate switches grouped_mm experts to it for the decode loop on any non-CPU device
    # (generation/utils.py _optimize_model_for_decode, in every transformers 5 release), where
    # each token-expert pair gathers its expert's whole weights into a new tensor that a batched
    # matmul then reads (expert_cost.expert_kernels `batched`); False: grouped or fused
    # kernels that read each expert reached once.
    decode_experts_batched: bool = False
    # Whether the mode loads weights as a serving engine does (as_engine): bitsandbytes then
    # quantizes a MoE's experts too (weights.quantized_matrices `engine`).
    engine_loading: bool = False
    autocast_cache_share: float = 1.0
    # A captured compiled training step (transformer_cost.compiled_step under a mode that captures
    # CUDA graphs): the share of its dynamic memory (activations, temporaries, gradients) the
    # process reserves beyond the fragmentation share, while the capture's warm-up runs on a side
    # stream whose allocations cannot reuse the default stream's cached blocks, beside the blocks
    # the compiling step left pinned (backends/torch/tuned.py _try_capture); 0: none.
    capture_warmup_share: float = 0.0
    # The share of the streaming rate a kernel whose eager passes mix 16-bit and FP32 tensors
    # reaches (Kernel.mixed_dtypes: an RMSNorm decoder's elementwise work under autocast) beside the
    # memory_efficiency of same-dtype kernels; 1.0: the same.
    mixed_dtype_memory_efficiency: float = 1.0
    # Whether an AMP-fp16 training step's GradScaler reads its inf check on the host before the
    # optimizer step (torch's GradScaler._maybe_opt_step: `sum(v.item() ...)`): the optimizer
    # is issued only once the backward has run, so its time follows the rest of the step's.
    grad_scaler_syncs: bool = False
    # The share of the peak a 16-bit GEMM whose dimensions defeat the tensor cores' aligned loads
    # reaches per element of its alignment (Kernel.misaligned: cuBLAS's align-1 kernels this share,
    # align-2 and align-4 kernels twice and four times it, never above an aligned GEMM's); None:
    # matmul_efficiency's, as where a compiler pads the shapes (inductor's shape padding).
    misaligned_matmul_efficiency: float | None = None
    cast_host_share: float = 1.0  # an autocast cast's host cost / host_seconds_per_op
    # A LoRA adapter's operation (its two rank-r Linears, the casts, dropout, scaling and add
    # around them, and their backward nodes) / host_seconds_per_op.
    adapter_host_share: float = 1.0
    # A tensor-level call of a Hugging Face decoder block (Kernel.tensor_ops: an RMSNorm's passes,
    # the rotary embedding's, the gated activation's product) / host_seconds_per_op.
    tensor_op_host_share: float = 1.0
    # The share of the streaming rate a LoRA adapter's rank-r products reach in FP32 beside a
    # 16-bit base (peft's FP32 adapters: cuBLAS's SIMT kernels); 1.0: the stream's.
    fp32_adapter_gemm_stream_share: float = 1.0
    # A classification forward pass's operation in inference mode (torch.inference_mode, Paddle's
    # no_grad: no autograd node recorded, no tensors saved for a backward) / host_seconds_per_op,
    # which training steps measure.
    inference_host_share: float = 1.0
    # Host time of one fp8 Linear in an eager decode step (its Triton launch), in Python-level
    # torch calls (generate_host_seconds_per_op); 1.0: as a 16-bit Linear's F.linear.
    fp8_linear_host_calls: float = 1.0
    # The same for a bitsandbytes Linear4bit and Linear8bitLt in inference (the Python-level calls
    # of their forward: casts, views, the custom op's Python kernel, its ctypes launch), and
    # whether LLM.int8's outlier check reads a device value on the host every Linear (a step's host
    # and GPU times then add instead of overlapping).
    bnb_4bit_linear_host_calls: float = 1.0
    bnb_int8_linear_host_calls: float = 1.0
    bnb_int8_syncs: bool = False
    decode_memory_efficiency: float | None = None  # None: the decode step streams like any kernel
    # Bandwidth share of PyTorch's native NCHW batch-norm kernels (estimate/resnet_cost.py);
    # None: memory_efficiency.
    bn_native_nchw_efficiency: float | None = None
    # One host-speed probe round (fitbench.backends.torch.host_probe) on the machines the host
    # constants were fitted on, in seconds; None: unknown. A measurement records its own round as
    # host_probe_seconds, so that an estimate can be held against it at that host's speed.
    host_probe_reference_seconds: float | None = None
    # The probe round of the host generate_host_seconds_per_op describes, where it is another than
    # host_probe_reference_seconds (the built-in value: the typical host fitbench's GPU runs landed
    # on, which an offline generation estimate assumes); None: host_probe_reference_seconds.
    generate_host_probe_seconds: float | None = None
    # The transformers release whose `generate` the decode counts follow (estimate/generate_ops.py
    # CallCounts: what a decode step issues changed between releases); None: the newest counted.
    transformers_version: str | None = None
    # Whether the mode's training and classification steps are compiled (torch.compile with
    # inductor), which fuses each chain of pointwise work into one kernel: the estimate then
    # times each kernel's `fused` form (estimate/segments.py Kernel.fused).
    fuses_pointwise: bool = False
    # Where it compiles: how many independent kernels inductor's combo kernels launch as one (the
    # per-layer weight casts of a ResNet step; estimate/resnet_cost.py); 0: no combo kernels.
    combo_kernel_group: int = 0
    provenance: str = ""

    @property
    def decode_efficiency(self) -> float:
        """The bandwidth share of a generation's decode step (its own kernels where it has them)."""
        own = self.decode_memory_efficiency
        return self.memory_efficiency if own is None else own

    @property
    def decode_fixed_seconds(self) -> float:
        """The fixed GPU time of a decode-step kernel's launch (the mode's own where it has one)."""
        own = self.decode_kernel_fixed_seconds
        return self.kernel_fixed_seconds if own is None else own

    def runs_other_decode_step(self, batch: int) -> bool:
        """Whether a decode step of `batch` sequences runs the mode's other step (above the batches
        its fused kernels take), not the fused one."""
        return 0 < self.decode_fused_max_batch < batch

    def decode_step_efficiency(self, batch: int) -> float:
        """The bandwidth share of a decode step of `batch` sequences, as the mode runs it."""
        own = self.decode_compiled_memory_efficiency
        if own is not None and self.runs_other_decode_step(batch):
            return own
        batched = self.decode_fused_batched_memory_efficiency
        if batched is not None and 1 < batch <= self.decode_fused_max_batch:
            return batched
        return self.decode_efficiency

    def decode_step_fixed_seconds(self, batch: int) -> float:
        """The fixed GPU time of a launch in a decode step of `batch` sequences, as the mode runs it."""
        if self.runs_other_decode_step(batch):
            return self.kernel_fixed_seconds
        return self.decode_fixed_seconds

    def as_engine(self) -> Profile:
        """This profile as a serving engine decodes with it (vLLM, SGLang, TensorRT-LLM): their
        paged KV caches hold each sequence's real context, so a decode step reads that, not a
        padded static cache (decode_cache_align 0), through their own attention kernels, which
        read a GQA group's K and V once (no decode_fused_attention_efficiency), and write each new
        token in place (no kv_cache_concat), attend over a latent cache without expanding it
        (no expands_latent_cache), and run each token's routed experts only (no runs_all_experts)
        through fused MoE kernels that read each expert reached once (no decode_experts_batched),
        from weights loaded as the engine loads them (engine_loading)."""
        return replace(
            self,
            decode_cache_align=0,
            decode_fused_attention_efficiency=None,
            kv_cache_concat=False,
            expands_latent_cache=False,
            runs_all_experts=False,
            decode_experts_batched=False,
            engine_loading=True,
        )

    def in_force(self, key: str) -> float:
        """The value the estimator uses for `key` (an absent decode share is memory_efficiency, an
        absent decode fixed time kernel_fixed_seconds, an absent batched fused share the decode
        share)."""
        if key == "decode_kernel_fixed_seconds":
            return self.decode_fixed_seconds
        absent = getattr(self, key, 0.0) is None
        if key == "decode_memory_efficiency" or (key == "decode_fused_batched_memory_efficiency" and absent):
            return self.decode_efficiency
        return getattr(self, key)

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# The profile's host times: seconds the host spends per framework operation. Everything else in a
# host cost is counted in these units (cast_host_share, adapter_host_share, tensor_op_host_share and
# inference_host_share are shares of an operation, fp8_linear_host_calls a number of calls), so it
# follows them; the rest is GPU time and memory.
HOST_TIME_KEYS = ("host_seconds_per_op", "generate_host_seconds_per_op")
# The profile field holding the probe round of the host each host time describes (a missing or
# empty generate round falls back to host_probe_reference_seconds: host_reference_seconds).
HOST_ROUND_KEYS = {
    "host_seconds_per_op": "host_probe_reference_seconds",
    "generate_host_seconds_per_op": "generate_host_probe_seconds",
}


def host_speed_ratio(
    profile: Profile, host_probe_seconds: float | None, device: str | None, key: str = "host_seconds_per_op"
) -> float | None:
    """This host's time per operation over the reference host's: a run's probe round over the
    round of the host the profile's host time `key` describes (host_reference_seconds; 1.2: this
    host takes 20 % longer an operation). The reference host is the one the offline estimate
    assumes for that time: the fit's for training and classification, the typical host for a
    generation's decode calls.

    None where it cannot be told: either figure missing or not positive, or the probe ran on a
    device other than CUDA. The reference round launched CUDA kernels, so the ratio measures the
    host that launches them; a CPU run's probe does the tiny operations' arithmetic on the same
    cores that compute the whole step, so its round says how fast that CPU computes, not how
    fast a host feeds a GPU (and a CPU measurement is not held against a GPU estimate anyway).
    """
    return _probe_ratio(host_reference_seconds(profile, key), host_probe_seconds, device)


def host_time_key(is_generation: bool) -> str:
    """The host time (HOST_TIME_KEYS) that paces a workload's eager step."""
    return "generate_host_seconds_per_op" if is_generation else "host_seconds_per_op"


def host_reference_seconds(profile: Profile, key: str) -> float | None:
    """The probe round of the host that the host time `key` (HOST_TIME_KEYS) describes: a
    generation's decode calls have a host of their own (generate_host_probe_seconds) where the
    profile names one, every other host time host_probe_reference_seconds."""
    return getattr(profile, HOST_ROUND_KEYS[key]) or profile.host_probe_reference_seconds


def _probe_ratio(
    reference: float | None, host_probe_seconds: float | None, device: str | None
) -> float | None:
    if not str(device or "").startswith("cuda"):
        return None
    if not reference or reference <= 0 or not host_probe_seconds or host_probe_seconds <= 0:
        return None
    return host_probe_seconds / reference


def following_release(profile: Profile, ran: object) -> Profile:
    """`profile` following the transformers release a run generated with (`ran`, its recorded
    version), where the profile counts a release at all (profiles.toml transformers_version: the
    decode step's calls and its copies of keys and values changed between releases)."""
    if profile.transformers_version is None or not isinstance(ran, str) or not ran:
        return profile
    return replace(profile, transformers_version=ran)


def host_scaled_profile(
    profile: Profile, host_probe_seconds: float | None, device: str | None = "cuda"
) -> Profile:
    """`profile` for a host whose probe round took `host_probe_seconds`: every host time
    (HOST_TIME_KEYS) times this round over the round of the host it describes
    (host_reference_seconds), the GPU constants as they are.

    Why: eager steps that are host-bound take operations x host time per operation, and the host
    is part of the machine like the GPU: the constants were fitted on one host, a run on another
    CPU launches the same operations faster or slower. A host time whose host is not known (no
    probe, no reference, or a probe not on a CUDA device) stays as it is.
    """
    scaled = {}
    for key in HOST_TIME_KEYS:
        ratio = _probe_ratio(host_reference_seconds(profile, key), host_probe_seconds, device)
        if ratio is not None:
            scaled[key] = getattr(profile, key) * ratio
    return replace(profile, **scaled) if scaled else profile


def user_profile_path() -> Path:
    """Where `fitbench calibrate` keeps values fitted on this machine."""
    home = os.environ.get("FITBENCH_HOME")
    base = (
        Path(home)
        if home
        else Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "fitbench"
    )
    return base / "profiles.toml"


@cache
def _load(path: Path) -> dict[str, dict[str, dict[str, object]]]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FitbenchError(
            f"cannot read efficiency profile {path}: {exc}",
            "fix or delete the file; `fitbench calibrate` writes it again",
            message_zh=f"无法读取效率配置文件 {path}:{exc}",
            hint_zh="请修正或删除该文件;`fitbench calibrate` 会重新写出它",
        ) from None


def forget_loaded() -> None:
    """Drop the profile files read so far, so the next get_profile reads them again (after
    `fitbench calibrate` rewrites the user's copy)."""
    _load.cache_clear()


def exec_modes(framework: str) -> tuple[str, ...]:
    """The execution modes `framework` has a profile for (its own table or a shared one)."""
    builtin = _load(BUILTIN)
    if framework not in builtin:
        raise unknown_name("framework", framework, builtin, kind_zh="框架")
    shared = (mode for fw, mode in SHARED_TABLES if fw == framework)
    return tuple(sorted({*builtin[framework], *shared}))


def get_profile(framework: str = "torch", exec_mode: str = "default", *, use_user: bool = True) -> Profile:
    """Built-in constants, overridden key by key by the user's calibrated file when present.

    An unknown framework or exec mode is an error, not another table's numbers: an estimate
    that silently used torch's or the default mode's efficiencies would present them as the
    requested mode's. The only stand-ins are the explicit SHARED_TABLES, whose provenance says so.
    """
    builtin = _load(BUILTIN)
    if exec_mode not in exec_modes(framework):
        raise unknown_name(
            f"{framework} exec mode", exec_mode, exec_modes(framework), kind_zh=f" {framework} 执行模式"
        )
    table_mode, note = SHARED_TABLES.get((framework, exec_mode), (exec_mode, ""))
    values = dict(builtin[framework][table_mode])
    if use_user:
        path = user_profile_path()
        user = _load(path).get(framework, {})
        # A calibration of the mode itself wins over one of the table it shares.
        if isinstance(user, dict) and exec_mode in user:
            table_mode, note = exec_mode, ""
        mine = _checked(user, table_mode, path)
        if any(k in mine for k in HOST_TIME_KEYS) and "host_probe_reference_seconds" not in mine:
            # Host times fitted on this machine without its probe round: the built-in round is
            # another host's, and rescaling by it would count this host's speed twice.
            values.pop("host_probe_reference_seconds", None)
        if "generate_host_seconds_per_op" in mine and "generate_host_probe_seconds" not in mine:
            # Likewise the built-in decode host's round: the user's decode host time is this
            # machine's (its round, where the fit kept one, is host_probe_reference_seconds).
            values.pop("generate_host_probe_seconds", None)
        values.update(mine)
    if note:
        values["provenance"] = f"{note}: {values.get('provenance') or 'profiles.toml'}"
    allowed = {f.name for f in fields(Profile)} - {"framework", "exec_mode"}
    return Profile(
        framework=framework, exec_mode=exec_mode, **{k: v for k, v in values.items() if k in allowed}
    )


def _checked(modes: object, exec_mode: str, path: Path) -> dict[str, object]:
    """The user's values for `exec_mode`, refused with a one-line error when a hand edit broke
    them (a string, a negative time, a zero efficiency the speed model would divide by)."""
    hint = "fix or delete the file; `fitbench calibrate` writes it again"
    hint_zh = "请修正或删除该文件;`fitbench calibrate` 会重新写出它"
    table = modes.get(exec_mode, {}) if isinstance(modes, dict) else None
    if not isinstance(table, dict):
        raise FitbenchError(
            f"efficiency profile {path}: expected a table per framework and mode",
            hint,
            message_zh=f"效率配置文件 {path}:每个框架和模式下应为一个表",
            hint_zh=hint_zh,
        )
    for key, value in table.items():
        if key == "provenance" or (key == "transformers_version" and isinstance(value, str)):
            continue
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not number or value < 0 or (key in _EFFICIENCIES and value == 0):
            raise FitbenchError(
                f"efficiency profile {path}: {key} = {value!r} is not a usable value",
                hint,
                message_zh=f"效率配置文件 {path}:{key} = {value!r} 不是可用的值",
                hint_zh=hint_zh,
            )
    return table
