"""``python -m tierwise.lab.plot OUT.png RUN.json...``: busbw vs size of `tierwise lab run
--json` reports — measured (solid) and predicted (dashed), flat and hierarchical, one panel
per report (e.g. aware vs naive placement)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def busbw_figure(reports: list[dict[str, Any]], out: Path) -> None:
    """Write the figure (PNG/SVG by suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        1, len(reports), figsize=(5 * len(reports), 3.8), sharey=True, squeeze=False
    )
    for ax, rep in zip(axes[0], reports, strict=True):
        for algo, color in (("flat", "tab:blue"), ("hierarchical", "tab:orange")):
            sizes = [r["size_bytes"] / 2**20 for r in rep[algo]]
            for side, style in (("measured", "-o"), ("predicted", "--x")):
                busbw = [r[side]["busbw_GBps"] * 1e3 for r in rep[algo]]
                ax.plot(sizes, busbw, style, color=color, label=f"{algo} {side}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("size (MiB)")
        ax.set_title(
            f"{rep['op']} {rep['nodes']}x{rep['ranks_per_node']}, "
            f"{rep['inter_rate_Gbps'] * 1e3:g} Mbit/s, {rep['oversubscription']:g}:1, "
            f"{rep['placement']}",
            fontsize=9,
        )
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("busbw (MB/s)")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str]) -> int:
    """CLI entry: first argument the output file, then the JSON reports."""
    out, *paths = argv
    busbw_figure([json.loads(Path(p).read_text()) for p in paths], Path(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
