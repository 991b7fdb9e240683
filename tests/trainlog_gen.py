"""Megatron-LM logs written from the model itself (tests of doctor and calibrate): the
arguments block and iteration lines of a run whose step time tierwise predicted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# A Llama-3-8B-shaped model as Megatron-LM prints its arguments.
LLAMA8B_ARGS: dict[str, Any] = {
    "num_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "group_query_attention": True,
    "num_query_groups": 8,
    "ffn_hidden_size": 14336,
    "padded_vocab_size": 128256,
    "swiglu": True,
    "untie_embeddings_and_output_weights": True,
    "seq_length": 8192,
    "micro_batch_size": 1,
    "bf16": True,
    "recompute_granularity": None,
    "context_parallel_size": 1,
    "expert_model_parallel_size": 1,
    "num_experts": None,
    "virtual_pipeline_model_parallel_size": None,
    "log_interval": 1,
}


def megatron_log(path: Path, args: dict[str, Any], step_s: float, iterations: int = 6) -> Path:
    """Write a Megatron-LM log of ``args`` whose iterations take ``step_s`` (the first two
    slower, as warm-up is)."""
    world = (
        args["tensor_model_parallel_size"]
        * args["pipeline_model_parallel_size"]
        * args["data_parallel_size"]
        * args.get("context_parallel_size", 1)
    )
    lines = [
        f"using world size: {world}",
        "------------------------ arguments ------------------------",
    ]
    for key in sorted({**args, "world_size": world}):
        value = {**args, "world_size": world}[key]
        lines.append(f"  {key} {'.' * max(2, 47 - len(key))} {value}")
    lines.append("-------------------- end of arguments ---------------------")
    for it in range(1, iterations + 1):
        ms = step_s * 1e3 * (3.0 if it == 1 else 1.0)
        lines.append(
            f" [2025-01-01 00:00:{it:02d}] iteration {it:8d}/ 1000 | consumed samples: {it} | "
            f"elapsed time per iteration (ms): {ms:.1f} | global batch size: "
            f"{args['global_batch_size']:5d} | lm loss: 1.0E+01 | loss scale: 1.0 |"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def model_step(path: Path, cluster: Any) -> float:
    """tierwise's step time of the run the log at ``path`` states, on ``cluster``."""
    from tierwise.verify.runcheck.diagnose import predict
    from tierwise.verify.runcheck.price import price
    from tierwise.verify.trainlog.read import read_run

    return float(predict(price(read_run(path), cluster))["step_time_s"])
