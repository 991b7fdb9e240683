"""`tierwise catalog`: every kind as JSON with units in the keys, and a one-line error."""

from __future__ import annotations

import pytest

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.cli.commands.catalog import KINDS, catalog_rows
from tierwise.errors import SpecError


def test_catalog_json_has_every_kind() -> None:
    data = cli_json("catalog")
    assert list(data) == list(KINDS)
    gpus = {g["key"]: g for g in data["gpus"]}
    # HBM as nvidia-smi reports it: 81,559 MiB = 79.65 GiB (the datasheet says "80 GB").
    assert gpus["h100-sxm"]["peak_bf16_tflops"] == 989 and gpus["h100-sxm"]["hbm_gib"] == 79.65
    links = {x["key"]: x for x in data["links"]}
    assert links["nvlink4"]["bw_GBps"] == 450
    assert links["nvlink4"]["effective_GBps"] == pytest.approx(450 * links["nvlink4"]["efficiency"])
    nics = {x["key"]: x for x in data["nics"]}
    assert (nics["ndr400"]["rate_Gbps"], nics["ndr400"]["line_GBps"]) == (400, 50)
    clusters = {x["key"]: x for x in data["clusters"]}
    assert clusters["dgx-h100"]["intra_GBps_per_gpu"] == 450
    assert clusters["dgx-h100"]["inter_GBps_per_gpu"] == 50
    assert clusters["gb200-nvl72"]["nvlink_domain_gpus"] == 72
    assert {"radix", "rate_Gbps", "latency_us"} <= set(data["switches"][0])
    models = {m["name"]: m for m in data["models"]}
    assert models["llama3-70b"]["params_total_B"] == pytest.approx(70.6, rel=0.01)


def test_catalog_one_kind_table() -> None:
    out = run_cli("catalog", "nics").stdout
    assert "ndr400" in out and "hdr200" in out and "h100-sxm" not in out


def test_unknown_kind() -> None:
    with pytest.raises(SpecError, match="allowed: gpus, links, nics, switches, clusters, models"):
        catalog_rows("routers")
    assert_user_error(run_cli("catalog", "routers", check=False), "unknown kind 'routers'")
