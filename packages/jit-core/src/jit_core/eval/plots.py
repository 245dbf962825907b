"""PNG plots of a run: S(t) and ES(t) per backend, and the distribution of speedups.
matplotlib is imported here only; it is not a dependency of jit-core."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Sequence

from ..errors import MissingDependencyError


def require_matplotlib():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("jit-eval --plot", "matplotlib", "matplotlib") from None
    return plt


def plot_all(
    directory: str, results, summary: Dict[str, Any], tolerances: Sequence[int]
) -> List[str]:
    """Write ``scores.png`` (S(t) and ES(t) per backend) and ``speedups.png`` (the
    speedup of every sample that ran without error, per backend); returns the paths."""
    plt = require_matplotlib()
    os.makedirs(directory, exist_ok=True)
    written = []

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, key, title in ((axes[0], "S", "S(t)"), (axes[1], "ES", "ES(t)")):
        for backend, s in summary.items():
            ts = [t for t in tolerances if s[key].get(str(t)) is not None]
            ax.plot(ts, [s[key][str(t)] for t in ts], marker="o", markersize=3, label=backend)
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_title(title)
        ax.set_xlabel("tolerance level t")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("score (geometric mean, 1 = eager Paddle)")
    axes[1].legend()
    fig.tight_layout()
    path = os.path.join(directory, "scores.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(6, 4))
    backends = list(summary)
    data = [
        [r["speedup"] for r in results if r["backend"] == b and r["error"] is None and r["speedup"]]
        for b in backends
    ]
    for i, values in enumerate(data, 1):
        if values:
            ax.scatter([i] * len(values), values, alpha=0.6, s=14)
    if any(data):
        ax.boxplot([d if d else [float("nan")] for d in data], showfliers=False)
    ax.set_xticks(range(1, len(backends) + 1))
    ax.set_xticklabels(backends)
    ax.set_yscale("log")
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_ylabel("speedup over eager Paddle (log)")
    ax.set_title("speedup per sample")
    fig.tight_layout()
    path = os.path.join(directory, "speedups.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
