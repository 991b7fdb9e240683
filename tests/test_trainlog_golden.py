"""Golden: every layout field and step time the ../shared/training_logs cases state in their
meta.json is what `read_run` recovers from the log and its config files (step time within
3%), and what a case's log does not state is listed as unknown, never guessed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import SHARED
from tierwise.verify.trainlog.read import read_run

LOGS = SHARED / "training_logs"
CASES = sorted(p.name for p in LOGS.iterdir() if p.is_dir()) if LOGS.exists() else []
STEP_TOLERANCE = 0.03
# meta.json config key -> record key (meta's names vary with the era of the log).
META_KEYS = {
    "tp": "layout.tp",
    "model_parallel_size": "layout.tp",
    "pp": "layout.pp",
    "vpp": "layout.vpp",
    "vp": "layout.vpp",
    "cp": "layout.cp",
    "ep": "layout.ep",
    "dp": "layout.dp",
    "fsdp": "layout.dp",
    "world_size": "gpus",
    "mbs": "layout.mbs",
    "local_batch_size": "layout.mbs",
    "batch_size_per_gpu": "layout.mbs",
    "gbs": "layout.gbs",
    "gbs_derived": "layout.gbs",
    "seq": "layout.seq",
}
MODEL_KEYS = {"num_layers": "layers", "hidden_size": "hidden", "num_attention_heads": "heads"}
# Fields meta.json states from outside log.txt and its config files: the reader must list
# them as unknown (the test fails if it guesses them).
NOT_IN_LOG = {
    "infini-doc-llama2-3.5b-rtx4090-8": {
        "layout.tp": "doc text 'TP=1 PP=4', not in the log",
        "layout.pp": "doc text",
        "layout.cp": "doc text",
        "layout.dp": "doc text",
        "gpus": "doc text (single node of 8)",
    },
    "megatron-issue-756-mixtral8x7b-h100-16-run1": {"gpus": "thread title '16 x H100'"},
    "torchtitan-pr-2389-gptoss-20b-b200-8-fullac": {
        "layout.dtype": "torchtitan's default at the PR commit, not printed"
    },
}


def _get(record: dict[str, Any], key: str) -> Any:
    group, _, name = key.partition(".")
    return record[group][name] if name else record[group]


@pytest.mark.parametrize("case", CASES)
def test_stated_layout_and_step_time_are_recovered(case: str) -> None:
    folder = LOGS / case
    meta = json.loads((folder / "meta.json").read_text())
    configs = sorted((folder / "config").iterdir()) if (folder / "config").exists() else []
    record = read_run(folder / "log.txt", configs).as_dict()
    skip = NOT_IN_LOG.get(case, {})
    checked = 0
    for meta_key, key in META_KEYS.items():
        stated = meta["config"].get(meta_key)
        if not isinstance(stated, int) or isinstance(stated, bool):
            continue
        if key in skip:
            assert _get(record, key) is None and key in record["unknown"], (key, skip[key])
            continue
        assert _get(record, key) == stated, (case, meta_key, stated, _get(record, key))
        checked += 1
    dtype = meta["config"].get("dtype")
    if isinstance(dtype, str) and dtype.split()[0] in ("bf16", "fp16", "fp8"):
        want = None if "layout.dtype" in skip else dtype.split()[0]
        assert record["layout"]["dtype"] == want, (case, dtype)
    for meta_key, key in MODEL_KEYS.items():
        stated = meta["model"].get(meta_key)
        if isinstance(stated, int) and record["model"][key] is not None:
            assert record["model"][key] == stated, (case, meta_key)
    measured = meta["measured"]["step_time_s"]
    got = record["measured"]["step_time_s"]
    assert got is not None, record["unknown"]
    assert abs(got / measured - 1) <= STEP_TOLERANCE, (case, got, measured)
    assert record["measured"]["step_time_method"]
    assert checked or case == "torchtitan-pr-2389-gptoss-20b-b200-8-fullac" or skip


def test_every_case_is_read() -> None:
    if not CASES:
        pytest.skip("../shared/training_logs is not present")
    assert len(CASES) >= 14
