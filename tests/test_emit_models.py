"""Emitters carry the architecture: Megatron-LM model flags (round trip), torchtitan
[model] name/flavor, DeepSpeed's Hugging Face model path."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tierwise.errors import SpecError
from tierwise.plan.emit import (
    hf_model_path,
    launch_command,
    megatron_args,
    megatron_model_args,
    torchtitan_toml,
)
from tierwise.workload import Layout, ModelSpec, load_model, preset_names

FRAMEWORK_DATA = Path(__file__).parent / "data" / "frameworks"
MEGATRON = {
    line.strip()
    for line in (FRAMEWORK_DATA / "megatron_arguments.txt").read_text().splitlines()
    if line.startswith("--")
}
NORMS = {"RMSNorm": "rmsnorm", "LayerNorm": "layernorm"}
POSITIONS = {"rope": "rope", "learned_absolute": "learned"}


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
        }
    return fields


@pytest.mark.parametrize("name", ["llama3-70b", "deepseek-v3", "qwen3-235b-a22b", "gpt-oss-120b"])
def test_megatron_round_trip_gives_the_same_model(name: str) -> None:
    model = load_model(name)
    args = megatron_args(model, Layout(tp=8, dp=4, seq=4096, distributed_optimizer=True))
    # the vocabulary comes from the tokenizer, not a flag
    back = ModelSpec(name=name, vocab=model.vocab, **parse_model_flags(args))
    assert back.model_dump() == model.model_dump()


def test_megatron_flags_exist_for_every_preset() -> None:
    emitted = 0
    for name in preset_names():
        model = load_model(name)
        try:
            args = megatron_model_args(model, 4096)
        except SpecError as exc:  # GeGLU (Gemma 3), chunked attention (Llama 4)
            assert name.startswith(("gemma3", "llama4")), exc
            continue
        names = {arg.split()[0] for arg in args}
        assert names <= MEGATRON, (name, names - MEGATRON)
        emitted += 1
    assert emitted == len(preset_names()) - 3


def test_megatron_states_what_llama3_needs() -> None:
    """Megatron's defaults are LayerNorm, learned positions, biases, tied embeddings, GELU."""
    args = set(megatron_model_args(load_model("llama3-70b"), 8192))
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
    qwen = megatron_model_args(load_model("qwen1.5-moe-a2.7b"), 4096)
    assert "--add-qkv-bias" in qwen and "--moe-shared-expert-intermediate-size 5632" in qwen


def test_megatron_moe_layer_patterns() -> None:
    ds = megatron_model_args(load_model("deepseek-v3"), 4096)
    assert '--moe-layer-freq "([0]*3+[1]*58)"' in ds and "--mtp-num-layers 1" in ds
    assert _pattern("([0]*3+[1]*58)") == [0, 0, 0] + [1] * 58
    mav = load_model("llama4-maverick").model_copy(update={"local_attention": None})
    assert '--moe-layer-freq "([0,1]*24)"' in megatron_model_args(mav, 4096)


def test_megatron_rejects_what_its_arguments_cannot_say() -> None:
    with pytest.raises(SpecError, match="no GeGLU"):
        megatron_model_args(load_model("gemma3-27b"), 4096)
    with pytest.raises(SpecError, match="no chunked attention"):
        megatron_model_args(load_model("llama4-scout"), 4096)


@pytest.mark.parametrize(
    ("name", "tt_name", "flavor"),
    [
        ("llama3-70b", "llama3", "70B"),
        ("deepseek-v3", "deepseek_v3", "671B"),
        ("qwen3-30b-a3b", "qwen3", "30B-A3B"),
        ("llama4-maverick", "llama4", "17bx128e"),
    ],
)
def test_torchtitan_model_and_flavor(name: str, tt_name: str, flavor: str) -> None:
    toml = tomllib.loads(torchtitan_toml(Layout(dp=8, seq=4096, zero=3), load_model(name)))
    assert (toml["model"]["name"], toml["model"]["flavor"]) == (tt_name, flavor)


def test_torchtitan_model_from_a_config_file_and_fp8() -> None:
    hf = load_model(str(Path(__file__).parent / "data" / "hf" / "qwen3-8b.json"))
    lay = Layout(dp=8, seq=4096, zero=3, dtype="fp8")
    model = tomllib.loads(torchtitan_toml(lay, hf))["model"]
    assert model == {"name": "qwen3", "flavor": "8B", "converters": ["float8"]}


def test_torchtitan_names_models_it_lacks() -> None:
    with pytest.raises(SpecError, match="torchtitan has no gpt-oss-120b"):
        torchtitan_toml(Layout(dp=8, seq=4096, zero=3), load_model("gpt-oss-120b"))


def test_deepspeed_loads_the_hugging_face_model() -> None:
    lay = Layout(dp=8, seq=4096, zero=3)
    cmd = launch_command("deepspeed", load_model("gpt-oss-120b"), lay)
    assert "--model_name_or_path openai/gpt-oss-120b" in cmd
    hf = load_model(str(Path(__file__).parent / "data" / "hf" / "deepseek-v3.json"))
    assert hf_model_path(hf) == "deepseek-ai/DeepSeek-V3"


def test_megatron_expert_tensor_parallel_size() -> None:
    """Megatron's expert TP defaults to --tensor-model-parallel-size; another etp is stated."""
    model = load_model("deepseek-v3")
    plain = megatron_args(model, Layout(tp=2, ep=8, dp=8, seq=4096))
    assert not any(arg.startswith("--expert-tensor-parallel-size") for arg in plain)
    etp1 = megatron_args(model, Layout(tp=2, etp=1, ep=16, dp=8, seq=4096))
    assert "--expert-tensor-parallel-size 1" in etp1
