"""Emitters carry the architecture: Megatron-LM model flags (round trip), torchtitan
[model] name/flavor, DeepSpeed's Hugging Face model path."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.emit_views import torchtitan_view
from tierwise.errors import SpecError
from tierwise.plan.emit import launch_of, megatron_args, torchtitan_args
from tierwise.plan.emit.common import HF_REPOS, hf_path
from tierwise.plan.emit.megatron import model_args
from tierwise.workload import Layout, ModelSpec, load_model, preset_names

FRAMEWORK_DATA = Path(__file__).parent / "data" / "frameworks"
MEGATRON = {
    line.strip()
    for line in (FRAMEWORK_DATA / "megatron_arguments.txt").read_text().splitlines()
    if line.startswith("--")
}
NORMS = {"RMSNorm": "rmsnorm", "LayerNorm": "layernorm"}
POSITIONS = {"rope": "rope", "learned_absolute": "learned", "yarn": "rope"}


def _pattern(text: str) -> list[int]:
    """Evaluate a Megatron --moe-layer-freq list pattern ("([0]*3+[1]*58)")."""
    assert re.fullmatch(r"[\[\]\(\)01,+*\d]+", text), text
    return list(eval(text, {"__builtins__": {}}))  # digits and list operators only


def parse_model_flags(args: list[str]) -> dict[str, Any]:
    """Rebuild tierwise model fields from Megatron-LM flags, as Megatron reads them."""
    flags: dict[str, str | bool] = {}
    for arg in args:
        name, _, value = arg.partition(" ")
        flags[name] = value.strip('"') if value else True
    heads = int(flags["--num-attention-heads"])
    fields: dict[str, Any] = {
        "layers": int(flags["--num-layers"]),
        "hidden": int(flags["--hidden-size"]),
        "heads": heads,
        "kv_heads": int(flags.get("--num-query-groups", heads)),
        "ffn_hidden": int(flags["--ffn-hidden-size"]),
        "norm": NORMS[str(flags["--normalization"])],
        "activation": "swiglu" if "--swiglu" in flags else "gelu",
        "position": POSITIONS[str(flags["--position-embedding-type"])],
        "bias": "qkv"
        if "--add-qkv-bias" in flags
        else "none"
        if "--disable-bias-linear" in flags
        else "all",
        "tied_embeddings": "--untie-embeddings-and-output-weights" not in flags,
        "qk_norm": "--qk-layernorm" in flags,
        "attention_sinks": flags.get("--softmax-type") == "learnable",
        "mtp_layers": int(flags.get("--mtp-num-layers", 0)),
        "max_seq": int(flags["--max-position-embeddings"]),
    }
    if "--rotary-base" in flags:
        fields["rope_theta"] = float(flags["--rotary-base"])
    if "--norm-epsilon" in flags:
        fields["norm_eps"] = float(flags["--norm-epsilon"])
    fields["rope_scaling"] = _rope_scaling(flags)
    if "--kv-channels" in flags:
        fields["head_dim"] = int(flags["--kv-channels"])
    if "--multi-latent-attention" in flags:
        q_lora = flags.get("--q-lora-rank")
        fields["mla"] = {
            "q_lora_rank": int(q_lora) if q_lora else None,
            "kv_lora_rank": int(flags["--kv-lora-rank"]),
            "qk_nope_head_dim": int(flags["--qk-head-dim"]),
            "qk_rope_head_dim": int(flags["--qk-pos-emb-head-dim"]),
            "v_head_dim": int(flags["--v-head-dim"]),
        }
    if "--window-size" in flags:
        left, right = map(int, str(flags["--window-size"]).split(","))
        assert right == 0
        skip = flags.get("--window-attn-skip-freq")
        fields["local_attention"] = {"window": left + 1, "global_every": skip and int(skip)}
    if "--num-experts" in flags:
        pattern = _pattern(str(flags.get("--moe-layer-freq", f"[1]*{fields['layers']}")))
        dense = pattern.index(1)
        every = [*pattern[dense + 1 :], 1].index(1) + 1
        shared = int(flags.get("--moe-shared-expert-intermediate-size", 0))
        expert = int(flags["--moe-ffn-hidden-size"])
        fields["moe"] = {
            "experts": int(flags["--num-experts"]),
            "top_k": int(flags["--moe-router-topk"]),
            "expert_ffn_hidden": expert,
            "shared_experts": 1 if shared else 0,
            "shared_expert_ffn_hidden": shared if shared not in (0, expert) else None,
            "dense_layers": dense,
            "every": every,
            "router": str(flags.get("--moe-router-score-function", "softmax")),
            "expert_bias": "--moe-router-enable-expert-bias" in flags,
            "renormalize": "--moe-router-pre-softmax" not in flags,
            "score_scale": _number(flags, "--moe-router-topk-scaling-factor"),
            "groups": _number(flags, "--moe-router-num-groups", int),
            "group_top_k": _number(flags, "--moe-router-group-topk", int),
        }
    return fields


def _number(flags: dict[str, Any], name: str, kind: Any = float) -> Any:
    return kind(flags[name]) if name in flags else None


def _rope_scaling(flags: dict[str, Any]) -> dict[str, Any] | None:
    """Megatron's rope scaling flags as the config.json's rope_scaling."""
    if "--use-rope-scaling" in flags:  # Llama 3.1's, its band fixed by Megatron-core
        factor = float(flags["--rope-scaling-factor"])
        return {"kind": "llama3", "factor": factor, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_seq": 8192}  # fmt: skip
    if "--rotary-scaling-factor" not in flags:
        return None
    return {
        "kind": "yarn",
        "factor": float(flags["--rotary-scaling-factor"]),
        "original_max_seq": _number(flags, "--yarn-original-max-position-embeddings", int),
        "beta_fast": _number(flags, "--yarn-beta-fast"),
        "beta_slow": _number(flags, "--yarn-beta-slow"),
        "mscale": _number(flags, "--mscale"),
        "mscale_all_dim": _number(flags, "--mscale-all-dim"),
    }


@pytest.mark.parametrize(
    "name",
    [
        "llama3-70b",
        "llama3-405b",
        "deepseek-v3",
        "qwen3-235b-a22b",
        "gpt-oss-120b",
    ],
)
def test_megatron_round_trip_gives_the_same_model(name: str) -> None:
    model = load_model(name)
    args = megatron_args(model, Layout(tp=8, dp=4, seq=4096, distributed_optimizer=True))
    # the vocabulary comes from the tokenizer, not a flag
    back = ModelSpec(name=name, vocab=model.vocab, **parse_model_flags(args))
    assert back.model_dump(exclude={"hf_path"}) == model.model_dump(exclude={"hf_path"})
    assert f"--tokenizer-model {HF_REPOS[name]}" in args


def test_megatron_flags_exist_for_every_preset() -> None:
    emitted = 0
    for name in preset_names():
        model = load_model(name)
        try:
            args = model_args(model, 4096)
        except SpecError as exc:  # GeGLU (Gemma 3), chunked attention (Llama 4)
            assert name.startswith(("gemma3", "llama4")), exc
            continue
        names = {arg.split()[0] for arg in args}
        assert names <= MEGATRON, (name, names - MEGATRON)
        emitted += 1
    assert emitted == len(preset_names()) - 3  # gemma3-27b, llama4-scout, llama4-maverick


def test_megatron_states_what_llama3_needs() -> None:
    """Megatron's defaults are LayerNorm, learned positions, biases, tied embeddings, GELU."""
    args = set(model_args(load_model("llama3-70b"), 8192))
    assert {
        "--normalization RMSNorm",
        "--swiglu",
        "--position-embedding-type rope",
        "--rotary-base 500000",
        "--disable-bias-linear",
        "--untie-embeddings-and-output-weights",
        "--kv-channels 128",
        "--max-position-embeddings 8192",
        "--tokenizer-type HuggingFaceTokenizer",
        "--tokenizer-model meta-llama/Meta-Llama-3-70B",
    } <= args
    qwen = model_args(load_model("qwen1.5-moe-a2.7b"), 4096)
    assert "--moe-router-pre-softmax" in qwen  # norm_topk_prob false: no renormalisation
    ds = model_args(load_model("deepseek-v3"), 4096)
    assert {"--moe-router-topk-scaling-factor 2.5", "--moe-router-num-groups 8"} <= set(ds)
    assert {"--rope-type yarn", "--rotary-scaling-factor 40", "--norm-epsilon 1e-06"} <= set(ds)
    assert "--moe-grouped-gemm" in ds
    assert "--add-qkv-bias" in qwen and "--moe-shared-expert-intermediate-size 5632" in qwen


def test_megatron_moe_layer_patterns() -> None:
    ds = model_args(load_model("deepseek-v3"), 4096)
    assert '--moe-layer-freq "([0]*3+[1]*58)"' in ds and "--mtp-num-layers 1" in ds
    assert _pattern("([0]*3+[1]*58)") == [0, 0, 0] + [1] * 58
    mav = load_model("llama4-maverick").model_copy(update={"local_attention": None})
    assert '--moe-layer-freq "([0,1]*24)"' in model_args(mav, 4096)


def test_megatron_rejects_what_its_arguments_cannot_say() -> None:
    with pytest.raises(SpecError, match="no GeGLU"):
        model_args(load_model("gemma3-27b"), 4096)
    with pytest.raises(SpecError, match="no chunked attention"):
        model_args(load_model("llama4-scout"), 4096)


@pytest.mark.parametrize(
    ("name", "module", "config", "dtype"),
    [
        ("llama3-70b", "llama3", "llama3_70b", "bf16"),
        ("llama3-405b", "llama3", "llama3_405b", "fp8"),
        ("deepseek-v3", "deepseek_v3", "deepseek_v3_671b_float8", "fp8"),
        ("qwen3-30b-a3b", "qwen3", "qwen3_30b_a3b", "bf16"),
        ("gpt-oss-120b", "gpt_oss", "gpt_oss_120b", "bf16"),
    ],
)
def test_torchtitan_module_and_registered_config(
    name: str, module: str, config: str, dtype: str
) -> None:
    lay = Layout(dp=8, seq=4096, zero=3, dtype=dtype)
    view = torchtitan_view(torchtitan_args(load_model(name), lay))
    assert (view["module"], view["config"]) == (module, config)


def test_torchtitan_model_from_a_config_file_of_a_registered_shape() -> None:
    hf = load_model(str(Path(__file__).parent / "data" / "hf" / "qwen3-32b.json"))
    view = torchtitan_view(torchtitan_args(hf, Layout(dp=8, seq=4096, zero=3)))
    assert (view["module"], view["config"]) == ("qwen3", "qwen3_32b")


def test_torchtitan_names_models_and_precisions_it_lacks() -> None:
    with pytest.raises(SpecError, match=r"torchtitan 0\.3\.0 registers no config for it"):
        torchtitan_args(load_model("qwen3-8b"), Layout(dp=8, seq=4096, zero=3))
    with pytest.raises(SpecError, match="registers llama3-405b as llama3_405b \\(fp8\\)"):
        torchtitan_args(load_model("llama3-405b"), Layout(dp=8, seq=4096, zero=3))


def test_deepspeed_runs_the_users_script_with_its_config_arguments_only() -> None:
    lay = Layout(dp=8, seq=4096, zero=3)
    launch = launch_of("deepspeed", load_model("gpt-oss-120b"), lay)
    assert launch.program[1:] == ["--deepspeed", "--deepspeed_config deepspeed.json"]
    assert launch.launcher == "deepspeed"


def test_the_tokenizer_is_the_config_directory_or_the_hub_repository() -> None:
    path = Path(__file__).parent / "data" / "hf" / "deepseek-v3.json"
    hf = load_model(str(path))
    assert hf_path(hf, "megatron") == str(path.resolve().parent)
    assert hf_path(load_model("deepseek-v3"), "megatron") == "deepseek-ai/DeepSeek-V3"
    odd = load_model("llama3-8b").model_copy(update={"name": "mine", "hidden": 4160})
    with pytest.raises(SpecError, match="no Hugging Face repository or directory known"):
        hf_path(odd, "megatron")


def test_megatron_expert_tensor_parallel_size() -> None:
    """Megatron's expert TP defaults to --tensor-model-parallel-size; another etp is stated."""
    model = load_model("deepseek-v3")
    plain = megatron_args(model, Layout(tp=2, ep=8, dp=8, seq=4096))
    assert not any(arg.startswith("--expert-tensor-parallel-size") for arg in plain)
    etp1 = megatron_args(model, Layout(tp=2, etp=1, ep=16, dp=8, seq=4096))
    assert "--expert-tensor-parallel-size 1" in etp1
