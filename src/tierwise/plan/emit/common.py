"""What every emitter shares: refusals in one line, the launch it hands the Slurm script, and
where a model's Hugging Face files (tokenizer, config) live."""

from __future__ import annotations

from typing import Any, NamedTuple

from tierwise import frameworks
from tierwise.errors import SpecError
from tierwise.workload.layout import Layout
from tierwise.workload.spec import ModelSpec


class Launch(NamedTuple):
    """What runs a plan: the environment it needs, the program and its arguments, and how
    the program is started on the nodes (`Framework.launcher`)."""

    env: dict[str, str]
    program: list[str]
    launcher: str
    config_file: str | None = None
    """The emitted file the program reads (None: everything is in its arguments)."""


def refuse(kind: str, reason: str) -> SpecError:
    """The one-line error of an emission that cannot be made."""
    return SpecError(f"--emit {kind}: {reason}")


def check_runs(
    fw: frameworks.Framework, layout: Layout, flags: Any = None, model: Any = None
) -> None:
    """Refuse, in one line, a layout the framework cannot run, or cannot run with the
    behaviour flags `flags` of `model` (its table row's reason, `frameworks.refusal`)."""
    reason = frameworks.refusal(fw, layout, None, flags, model)
    if reason is not None:
        raise refuse(str(fw.emitter), reason)


HF_REPOS: dict[str, str] = {
    "gpt3-175b": "openai-community/gpt2",  # no Hub repository; GPT-2's tokenizer (50257)
    "llama2-7b": "meta-llama/Llama-2-7b-hf",
    "llama2-13b": "meta-llama/Llama-2-13b-hf",
    "llama2-70b": "meta-llama/Llama-2-70b-hf",
    "llama3-8b": "meta-llama/Meta-Llama-3-8B",
    "llama3-70b": "meta-llama/Meta-Llama-3-70B",
    "llama3-405b": "meta-llama/Llama-3.1-405B",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "mixtral-8x22b": "mistralai/Mixtral-8x22B-v0.1",
    "deepseek-moe-16b": "deepseek-ai/deepseek-moe-16b-base",
    "qwen1.5-moe-a2.7b": "Qwen/Qwen1.5-MoE-A2.7B",
    "mpt-7b": "mosaicml/mpt-7b",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "kimi-k2": "moonshotai/Kimi-K2-Instruct",
    "qwen3-8b": "Qwen/Qwen3-8B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "gpt-oss-20b": "openai/gpt-oss-20b",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "llama4-scout": "meta-llama/Llama-4-Scout-17B-16E",
    "llama4-maverick": "meta-llama/Llama-4-Maverick-17B-128E",
    "gemma3-27b": "google/gemma-3-27b-pt",
}
"""Preset -> Hugging Face Hub repository whose config.json it was written from (the
sources in ``workload/data/models.yaml``)."""


def same_shape(a: ModelSpec, b: ModelSpec) -> bool:
    """Equal architecture (the name, trained context and file location do not matter)."""
    skip = {"name", "max_seq", "hf_path"}
    return a.model_dump(exclude=skip) == b.model_dump(exclude=skip)


def preset_like(model: ModelSpec, names: list[str] | tuple[str, ...]) -> str | None:
    """The preset among `names` that `model` is (by name, or by the same shape)."""
    from tierwise.workload.load import preset

    if model.name in names:
        return model.name
    return next((name for name in names if same_shape(model, preset(name))), None)


def hf_path(model: ModelSpec, kind: str) -> str:
    """Where the model's Hugging Face files are (tokenizer, config): the directory of the
    config.json it was read from, else the Hub repository of its preset; one-line refusal
    where tierwise knows neither (a YAML spec of a model it has no repository for)."""
    if model.hf_path is not None:
        return model.hf_path
    name = preset_like(model, tuple(HF_REPOS))
    if name is None:
        raise refuse(
            kind,
            f"model {model.name!r}: no Hugging Face repository or directory known for its "
            "tokenizer; give the model as its config.json (in the directory holding the "
            "tokenizer) or add hf_path to the spec",
        )
    return HF_REPOS[name]
