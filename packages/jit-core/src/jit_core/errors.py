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


class GraphDeclined(JitError):
    """A backend does not serve this graph, and says why (an ONNX-based backend meets a
    call it has no lowering for where paddle2onnx is not installed): the graph runs on the
    paddle backend, and ``explain()`` shows the reason. Unlike a compile error, nothing
    was wrong with the user's program or the backend's build."""


class StaticShapesOnly(JitError):
    """A backend that serves dynamic shapes cannot serve this graph's (it reads sizes
    that an exported program would fix, or its build differs from Paddle at another
    size): jit-core then builds it once per input shape."""


def describe_instruction(inst) -> str:
    """``OPNAME argrepr``, as explain() shows the instruction of a break."""
    arg = f" {inst.argrepr}" if inst.argrepr else ""
    return f"{inst.opname}{arg}"


# ------------------------------------------------------------------ break categories
# Every ``Unsupported`` carries one of these strings as ``category``: a stable name for the
# kind of break (like TorchDynamo's ``gb_type``) that tests and tools can match on, while
# ``reason`` stays free wording for people. The set is closed; docs/usage.rst lists it.

#: a tensor's value decides a branch (``if t``, ``not t``, ``x in t``, ``max`` over tensors)
TENSOR_BRANCH = "tensor-branch"
#: tensor data leaves the graph as a Python value (``.numpy()``, ``.item()``, ``int(t)``)
DATA_LEAVES_GRAPH = "data-leaves-graph"
#: a call that does I/O (``print``, ``input``, ``open``)
IO_CALL = "io-call"
#: a side effect the capture does not replay: attribute, item or global stores, mutation of
#: a container from outside the frame inside a generator consumed step by step,
#: ``nonlocal`` stores, imports that load a module
SIDE_EFFECT = "side-effect"
#: an in-place tensor update that cannot stay in the graph (on inputs, parameters, views)
INPLACE_OUTSIDE = "inplace-outside"
#: a call to a library or C function, or a method, that the capture does not trace
UNTRACED_CALL = "untraced-call"
#: an instruction or language construct with no handler (class statement, ``return``
#: through ``finally``, an unknown intrinsic)
UNSUPPORTED_OPCODE = "unsupported-opcode"
#: the code raises: ``raise``, a failing ``assert``, or an operation that raises during
#: capture (``KeyError``, ``TypeError`` ...); the frame runs eagerly so Python raises it
RAISES = "raises"
#: a generator or coroutine, or a ``yield`` the capture cannot interleave
GENERATOR = "generator"
#: ``with`` on a context manager the capture does not model, or a gradient / autocast mode
#: change it cannot capture
CONTEXT_MANAGER = "context-manager"
#: a value the capture cannot know or model: an unknown object's attribute, a non-constant
#: where a constant is needed, an object of a type it does not model
DYNAMIC_VALUE = "dynamic-value"
#: a value made during the capture cannot be rebuilt in Python after the graph or at a
#: graph break
RECONSTRUCT = "reconstruct"
#: a limit of the JIT: recompile limits, inlining depth, instruction cap, unrolling cap,
#: frames the hook cannot see
LIMIT = "limit"
#: a bug or broken invariant of jit-core itself
INTERNAL = "internal"
#: the default, for a break no other category describes
UNSUPPORTED = "unsupported"

#: every category, in the order the docs list them
CATEGORIES = (
    TENSOR_BRANCH,
    DATA_LEAVES_GRAPH,
    IO_CALL,
    SIDE_EFFECT,
    INPLACE_OUTSIDE,
    UNTRACED_CALL,
    UNSUPPORTED_OPCODE,
    RAISES,
    GENERATOR,
    CONTEXT_MANAGER,
    DYNAMIC_VALUE,
    RECONSTRUCT,
    LIMIT,
    INTERNAL,
    UNSUPPORTED,
)


class Unsupported(Exception):
    """Raised inside a capture: this frame cannot be captured (yet).

    It never reaches the user unless ``full_graph=True``; the frame runs eagerly instead and
    ``explain()`` shows ``reason`` with the place it happened. ``category`` is one of
    ``CATEGORIES``: the kind of break, stable across rewordings of ``reason``.
    """

    def __init__(self, reason: str, category: str = UNSUPPORTED):
        super().__init__(reason)
        self.reason = reason
        self.category = category
        #: "file:line" and the instruction, filled in by the executor that caught it
        self.location: Optional[str] = None
        self.instruction: Optional[str] = None
        #: the instruction of the captured frame itself that was running (the call site
        #: when the reason lies in an inlined function), and how many instructions that
        #: frame had run: where a graph break can go
        self.root_instruction = None
        self.root_location: Optional[str] = None
        self.root_step: Optional[int] = None
        #: the code reads the frame it runs in (``locals()``, ``sys._getframe()``): a
        #: resume function, a frame of its own, would give it other answers, so the graph
        #: cannot break there. Cleared where it is raised in an inlined call, whose call
        #: site can break (the callee then runs as its own frame).
        self.reads_frame = False

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


def raised_at_capture(what: str, e: BaseException) -> str:
    """The reason of a break where a Paddle call raised on the capture's examples."""
    return (
        f"{what}(...) raised {type(e).__name__} during capture ({str(e).strip()[:200]}): "
        "the call runs in Python, where Paddle raises it itself"
    )


class Raised(Unsupported):
    """The captured code raises ``exc`` here, and would at every call its guards admit (a
    Paddle getter that raises outside a distributed run). The executor takes it to the
    handler of the ``try`` block around it, as CPython would; where no handler takes
    it, it is an ``Unsupported`` like any other (the graph breaks, and Python raises).
    ``made_here``: the frame made ``exc`` from constants (``raise ValueError("...")``), so
    its handler may read its ``args``."""

    def __init__(self, exc: BaseException, reason: str, made_here: bool = False):
        super().__init__(reason, category=RAISES)
        self.exc = exc
        self.made_here = made_here


class ExceptionsNotSimulated(Exception):
    """A capture that took an exception to its handler met something it cannot capture
    before the handler was done: capture the frame again without taking exceptions to
    handlers (the ``try`` block then runs in Python, as before). Not an ``Unsupported``:
    it must not become a graph break."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class GraphBreakError(JitError):
    """``full_graph=True`` was asked for but the function cannot be captured whole."""

    def __init__(
        self,
        reason: str,
        location: Optional[str],
        instruction: Optional[str],
        category: str = UNSUPPORTED,
        asked: str = "full_graph=True",
    ):
        self.reason = reason
        self.location = location
        self.instruction = instruction
        #: the category of the break (one of ``CATEGORIES``)
        self.category = category
        where = f" at {location}" if location else ""
        inst = f" ({instruction})" if instruction else ""
        super().__init__(f"{asked}, but the graph breaks{where}{inst}: {reason}")


class RecompileError(JitError):
    """A call would compile a frame again while ``jit_core.set_stance("fail_on_recompile")``
    is in force; the message names the frame and the guard that failed."""


class CaptureError(JitError):
    """``jit_core.capture`` could not turn the call into one graph."""


class MissingDependencyError(JitError, ImportError):
    """An optional package that a feature needs is not installed; the message names it."""

    def __init__(self, feature: str, package: str, install: str, message: str = ""):
        self.package = package
        # ``message`` (naming the package) replaces the default where an install command
        # would not help, e.g. the package has no wheels for this Python
        super().__init__(
            message or f"{feature} needs the {package!r} package: pip install {install}"
        )
