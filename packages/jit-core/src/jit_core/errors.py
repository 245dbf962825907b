"""Exceptions that jit-core raises or uses to stop a capture."""

from __future__ import annotations

from typing import Optional


class JitError(Exception):
    """Base class of every error jit-core raises to the user."""


class BackendNotFoundError(JitError, LookupError):
    """The backend name given to ``optimize`` is not installed."""


class BackendUnavailableError(JitError, RuntimeError):
    """The backend is installed but cannot run in this environment; the message says why."""


class BackendCompileError(JitError):
    """A backend failed to compile a captured graph."""


def describe_instruction(inst) -> str:
    """``OPNAME argrepr``, as explain() shows the instruction of a break."""
    arg = f" {inst.argrepr}" if inst.argrepr else ""
    return f"{inst.opname}{arg}"


class Unsupported(Exception):
    """Raised inside a capture: this frame cannot be captured (yet).

    It never reaches the user unless ``full_graph=True``; the frame runs eagerly instead and
    ``explain()`` shows ``reason`` with the place it happened.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        #: "file:line" and the instruction, filled in by the executor that caught it
        self.location: Optional[str] = None
        self.instruction: Optional[str] = None
        #: the instruction of the captured frame itself that was running (the call site
        #: when the reason lies in an inlined function), and how many instructions that
        #: frame had run: where a graph break can go
        self.root_instruction = None
        self.root_location: Optional[str] = None
        self.root_step: Optional[int] = None

    def move_to_root(self) -> None:
        """Report the break where the captured frame itself stopped (the call site, when
        the reason lies in a function it called), keeping the inner place in the reason."""
        here = describe_instruction(self.root_instruction)
        if (self.location, self.instruction) != (self.root_location, here):
            self.reason = (
                f"{self.reason} (inside the call, at {self.location} [{self.instruction}])"
            )
            self.location, self.instruction = self.root_location, here

    def could_not_break(self, why: str) -> Unsupported:
        """This reason, plus why the graph could not break where it stopped."""
        self.reason = f"{self.reason}; and the graph could not break there: {why}"
        return self

    def describe(self) -> str:
        where = f" at {self.location}" if self.location else ""
        inst = f" ({self.instruction})" if self.instruction else ""
        return f"{self.reason}{where}{inst}"


class GraphBreakError(JitError):
    """``full_graph=True`` was asked for but the function cannot be captured whole."""

    def __init__(self, reason: str, location: Optional[str], instruction: Optional[str]):
        self.reason = reason
        self.location = location
        self.instruction = instruction
        where = f" at {location}" if location else ""
        inst = f" ({instruction})" if instruction else ""
        super().__init__(f"full_graph=True, but the graph breaks{where}{inst}: {reason}")


class CaptureError(JitError):
    """``jit_core.capture`` could not turn the call into one graph."""


class MissingDependencyError(JitError, ImportError):
    """An optional package that a feature needs is not installed; the message names it."""

    def __init__(self, feature: str, package: str, install: str):
        self.package = package
        super().__init__(f"{feature} needs the {package!r} package: pip install {install}")
