"""``python -m jit_core.cache``: see ``jit_core.cache.cli``."""

import sys

from .cli import main

sys.exit(main())
