"""Evaluation on GraphNet-format computation-graph samples: ``jit-eval`` (``cli``), the
sample format (``samples``), GraphNet's S(t)/ES(t) scores (``scores``), the worker-process
runner (``runner``), reports and plots, and ``extract()``, which writes the graphs the JIT
captures from a program as such samples."""

from __future__ import annotations

import warnings

# Paddle warns at import that it found no ccache, which only building C++ extensions
# needs: noise in the output of every run (once here, once more in the workers' fork
# server, which imports this package); only that warning, only while Paddle is imported
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="No ccache found", category=UserWarning)
    from jit_core.graphnet.samples import (
        Sample,
        SampleError,
        TensorMeta,
        find_samples,
        load_sample,
    )

from .scores import es_scores, s_scores

__all__ = [
    "Sample",
    "SampleError",
    "TensorMeta",
    "find_samples",
    "load_sample",
    "s_scores",
    "es_scores",
]
