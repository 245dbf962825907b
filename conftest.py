"""Shared by every test folder: keep Paddle's import-time noise out of the test output."""

import warnings

# Paddle warns at import when the optional C++-extension cache tool is missing; it says
# nothing about what is tested here. Pytest's own filterwarnings only applies inside tests.
warnings.filterwarnings("ignore", message="No ccache found", category=UserWarning)
