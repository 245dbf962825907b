"""PNG plots of a run: S(t) and ES(t) per backend, and the distribution of speedups.
matplotlib is imported here only; it is not a dependency of jit-core."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Sequence

from jit_core.errors import MissingDependencyError


def require_matplotlib():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("jit-eval --plot", "matplotlib", "matplotlib") from None
    return plt


def speedup_points(results, backends: Sequence[str]) -> List[Dict[str, Any]]:
    """Per backend, the speedups of the samples that ran correctly and how many did not
    (failed, wrong, or without a timing): every result of the backend is one or the
    other."""
    points = []
    for backend in backends:
        mine = [r for r in results if r["backend"] == backend]
        speedups = [r["speedup"] for r in mine if r["error"] is None and r.get("speedup")]
        points.append(
            {"backend": backend, "speedups": speedups, "failed": len(mine) - len(speedups)}
        )
    return points


def plot_all(
    directory: str, results, summary: Dict[str, Any], tolerances: Sequence[int]
) -> List[str]:
    """Write ``scores.png`` (S(t) and ES(t) per backend) and ``speedups.png`` (per
    backend, the speedup of every sample that ran without error, and every other sample
    as a red x below them, n in the title); returns the paths."""
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

    fig, ax = plt.subplots(figsize=(7, 4.5))
    backends = list(summary)
    points = speedup_points(results, backends)
    ran = [p["speedups"] for p in points]
    every = [v for values in ran for v in values]
    # a failed sample sits below every speedup, as an x: every sample is on the plot
    floor = min(every + [1.0]) / 3
    for i, p in enumerate(points, 1):
        if p["speedups"]:
            ax.scatter([i] * len(p["speedups"]), p["speedups"], alpha=0.6, s=14)
        if p["failed"]:
            k = p["failed"]
            # spread side by side, so that each failure is its own mark
            xs = [i + 0.3 * (j / max(k - 1, 1) - 0.5) for j in range(k)] if k > 1 else [i]
            ax.scatter(xs, [floor] * k, marker="x", color="red", s=24)
    if every:
        ax.boxplot([d if d else [float("nan")] for d in ran], showfliers=False)
    ax.set_xticks(range(1, len(backends) + 1))
    ax.set_xticklabels(
        [f"{p['backend']}\n{len(p['speedups'])} ran, {p['failed']} failed" for p in points]
    )
    ax.set_yscale("log")
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.axhline(floor * 1.5, color="red", linewidth=0.5, linestyle=":")
    ax.set_ylabel("speedup over eager Paddle (log); x: failed")
    samples = len({r["name"] for r in results})
    ax.set_title(f"speedup per sample (n = {samples} samples)")
    fig.tight_layout()
    path = os.path.join(directory, "speedups.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
