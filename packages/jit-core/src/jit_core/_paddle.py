"""PaddlePaddle is not a dependency of the jit-core distribution (every build of it, CPU
or GPU, provides ``import paddle``, and pip would put the CPU one next to a user's GPU
one): this checks at import that one is installed, and that its version is one jit-core
can run on."""

from __future__ import annotations

import re
import sys
import warnings
from typing import Optional, Tuple

#: the oldest Paddle jit-core runs on, and the releases its CI tests
MINIMUM = (3, 0)
TESTED = "3.0.0 on Python 3.8, 3.3.x on Python 3.9 to 3.13"
_INSTALL = (
    "install one build of it: `pip install paddlepaddle` (CPU) or `pip install "
    "paddlepaddle-gpu` (CUDA; see paddlepaddle.org.cn for the index of your CUDA "
    "version), or `pip install jit-core[cpu]`"
)


def _version(text: str) -> Optional[Tuple[int, int]]:
    m = re.match(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _tested(version: Tuple[int, int]) -> bool:
    if sys.version_info < (3, 9):
        return version == (3, 0)
    return version == (3, 3)


def check() -> None:
    """Raise ``ImportError`` naming what to install when Paddle is missing or too old;
    warn once when it is a release jit-core's CI does not test."""
    try:
        import paddle
    except ImportError as e:
        raise ImportError(f"jit_core needs PaddlePaddle, which is not installed: {_INSTALL}") from e
    text = str(getattr(paddle, "__version__", ""))
    version = _version(text)
    if version is None or version == (0, 0):
        return  # a development build: nothing to compare
    if version < MINIMUM:
        raise ImportError(
            f"jit_core needs PaddlePaddle 3.0 or newer, found {text}: upgrade the build you "
            f"have (`pip install -U paddlepaddle` or `paddlepaddle-gpu`); tested: {TESTED}"
        )
    if not _tested(version):
        warnings.warn(
            f"jit_core is tested with PaddlePaddle {TESTED}; found {text}",
            RuntimeWarning,
            stacklevel=3,
        )


check()
