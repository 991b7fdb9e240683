"""The shared training logs (../shared/training_logs) through ingest, doctor and calibrate
(JSON out): fields recovered, step time against meta.json, the prediction of each priceable
run on the cluster its log names, and leave-one-out calibration on the Eos (DGX H100) runs.
docs/validation-training-logs.md records a run of it."""

from __future__ import annotations

import json
from pathlib import Path

from tierwise.hardware.cluster import load_cluster
from tierwise.verify.runcheck.diagnose import compare
from tierwise.verify.runcheck.fit import fit
from tierwise.verify.runcheck.price import CannotPrice, price
from tierwise.verify.trainlog.read import read_run

LOGS = Path(__file__).resolve().parents[2] / "shared" / "training_logs"
EOS = ("mlperf41-nvidia-gpt3-175b-h100-256", "mlperf50-nvidia-llama31-405b-h100-512")


def _configs(folder: Path) -> list[Path]:
    return sorted((folder / "config").iterdir()) if (folder / "config").exists() else []


def main() -> None:
    cases = []
    for folder in sorted(p for p in LOGS.iterdir() if p.is_dir()):
        meta = json.loads((folder / "meta.json").read_text())
        record = read_run(folder / "log.txt", _configs(folder))
        step = record.measured["step_time_s"]
        row = {
            "case": folder.name,
            "framework": record.framework,
            "unknown_fields": len(record.unknown),
            "step_time_s": step,
            "meta_step_time_s": meta["measured"]["step_time_s"],
            "step_error_pct": None
            if step is None
            else (step / meta["measured"]["step_time_s"] - 1) * 100,
        }
        try:
            result = compare(price(record))
            row |= {
                "cluster": result["cluster_source"]["cluster"],
                "predicted_step_time_s": result["run"]["predicted_step_time_s"],
                "prediction_error_pct": result["run"]["error_pct"],
                "first_finding": result["findings"][0]["id"] if result["findings"] else None,
            }
        except CannotPrice as exc:
            row["not_priced"] = str(exc).split(": ", 1)[-1]
        cases.append(row)
    eos = [
        price(read_run(LOGS / c / "log.txt", _configs(LOGS / c)), load_cluster("dgx-h100"))
        for c in EOS
    ]
    print(json.dumps({"cases": cases, "eos_calibration": fit(eos).as_dict()}, indent=2))


if __name__ == "__main__":
    main()
