"""Evaluation on GraphNet-format computation-graph samples: ``jit-eval`` (``cli``), the
sample format (``samples``), GraphNet's S(t)/ES(t) scores (``scores``), the worker-process
runner (``runner``), reports and plots, and ``extract()``, which writes the graphs the JIT
captures from a program as such samples."""

from __future__ import annotations

from jit_core.graphnet.samples import Sample, SampleError, TensorMeta, find_samples, load_sample

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
