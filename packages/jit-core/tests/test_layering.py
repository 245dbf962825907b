"""The import map of docs/architecture.rst, checked on the source: the plugin contract,
``bytecode/`` and ``fx/`` are leaves (nothing of the executor, the variables, the runtime
or the backends below them), and jit-opcodes reaches jit-core through the contract only.

Every import counts, at module level or inside a function (a function-level import is a
dependency that only waits to run); those under ``if TYPE_CHECKING:`` do not run and do
not count."""

from __future__ import annotations

import ast
import os
from typing import Dict, Iterator, List, Set

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = os.path.dirname(os.path.dirname(HERE))
CORE = os.path.join(PACKAGES, "jit-core", "src")
OPCODES = os.path.join(PACKAGES, "jit-opcodes", "src", "jit_opcodes")
EVAL = os.path.join(PACKAGES, "jit-eval", "src", "jit_eval")

#: the modules a handler plugin may import, and that may import only each other: the
#: contract (spi, hookspecs, errors, what a graph pass is), the bytecode facts, the graph
LEAVES = ("jit_core.spi", "jit_core.hookspecs", "jit_core.errors", "jit_core.passes.base")
LEAF_PACKAGES = ("jit_core.bytecode", "jit_core.fx")
#: what jit-opcodes may import of jit-core: the contract, the bytecode facts, the values
OPCODES_MAY_IMPORT = LEAVES + ("jit_core.bytecode", "jit_core.variables")


def _modules(src: str, package: str) -> Dict[str, str]:
    found = {}
    for d, _, files in os.walk(os.path.join(src, package)):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                name = os.path.relpath(path, src)[:-3].replace(os.sep, ".")
                found[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return found


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, skipping the bodies of ``if TYPE_CHECKING:``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if (
                isinstance(child, ast.If)
                and isinstance(child.test, ast.Name)
                and child.test.id == "TYPE_CHECKING"
            ):
                todo.extend(child.orelse)
                continue
            todo.append(child)


def imported(module: str, path: str) -> Set[str]:
    """The dotted names ``module`` imports (``from a import b`` gives ``a.b`` and ``a``)."""
    is_package = path.endswith("__init__.py")
    parts = module.split(".") if is_package else module.split(".")[:-1]
    out: Set[str] = set()
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[: len(parts) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)
    return out


CORE_MODULES = _modules(CORE, "jit_core")
#: the names of jit_core's modules and subpackages (``from jit_core import x`` of one of
#: these imports a module, of anything else a name of the package)
CORE_SUBMODULE_NAMES = {m.split(".")[1] for m in CORE_MODULES if m.count(".") >= 1}


def _internal(names: Set[str]) -> Set[str]:
    return {n for n in names if n in CORE_MODULES}


def _is_leaf(name: str) -> bool:
    return name in LEAVES or any(name == p or name.startswith(p + ".") for p in LEAF_PACKAGES)


LEAF_MODULES = sorted(m for m in CORE_MODULES if _is_leaf(m))


def test_the_map_names_modules_that_exist():
    for name in LEAVES + LEAF_PACKAGES:
        assert name in CORE_MODULES, name


@pytest.mark.parametrize("module", LEAF_MODULES)
def test_a_leaf_imports_only_leaves(module):
    outside = sorted(
        m for m in _internal(imported(module, CORE_MODULES[module])) if not _is_leaf(m)
    )
    assert not outside, f"{module} imports {outside}, which are not part of the contract"


def test_jit_opcodes_reaches_jit_core_through_the_contract_only():
    for module, path in sorted(_modules(os.path.dirname(OPCODES), "jit_opcodes").items()):
        for name in imported(module, path):
            if name == "jit_core" or not name.startswith("jit_core."):
                # (``from jit_core import x`` lists x as well, checked on its own)
                continue
            allowed = any(name == m or name.startswith(m + ".") for m in OPCODES_MAY_IMPORT)
            assert allowed, f"{module} imports {name}, outside the contract"


#: what jit-eval may import of jit-core: its public API (the package itself), the errors
#: it names, the sample format, and the numerics triage (``jit_core.debug.compare``)
EVAL_MAY_IMPORT = ("jit_core.errors", "jit_core.graphnet", "jit_core.debug")


def test_jit_eval_uses_only_the_public_api_of_jit_core():
    for module, path in sorted(_modules(os.path.dirname(EVAL), "jit_eval").items()):
        for name in imported(module, path):
            if name == "jit_core" or not name.startswith("jit_core."):
                continue
            if name.count(".") == 1 and name.split(".")[1] not in CORE_SUBMODULE_NAMES:
                continue  # ``from jit_core import optimize``: a name of the package
            allowed = any(name == m or name.startswith(m + ".") for m in EVAL_MAY_IMPORT)
            assert allowed, f"{module} imports {name}, which is not jit-core's public API"


def _tx_members_used(path: str) -> Set[str]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "tx"
    }


def test_handlers_use_only_the_translator_protocol():
    from jit_core.executor.translator import Translator
    from jit_core.spi import Translator as Contract

    members = set(Contract.__annotations__) | {
        n for n, v in vars(Contract).items() if callable(v) and not n.startswith("_")
    }
    for module, path in sorted(_modules(os.path.dirname(OPCODES), "jit_opcodes").items()):
        extra = sorted(_tx_members_used(path) - members)
        assert not extra, f"{module} uses tx.{extra}, not in jit_core.spi.Translator"
    # and the executor's translator has every member the protocol promises
    with open(CORE_MODULES["jit_core.executor.translator"], encoding="utf-8") as f:
        source = f.read()
    for name in sorted(members):
        assert hasattr(Translator, name) or f"self.{name}" in source, name


#: what the variables must not import: they reach the graph and the translator through
#: the ``tx`` handed to them (as PaddleSOT's do), never by importing the executor
ABOVE_THE_VARIABLES = (
    "jit_core.executor",
    "jit_core.codegen",
    "jit_core.plugins",
    "jit_core.runtime.eval_frame",
    "jit_core.runtime.convert_frame",
    "jit_core.runtime.frame_cache",
    "jit_core.runtime.frame_calls",
    "jit_core.api",
    "jit_core.capture",
)


@pytest.mark.parametrize(
    "module", sorted(m for m in CORE_MODULES if m.startswith("jit_core.variables"))
)
def test_the_variables_do_not_import_the_executor(module):
    above = sorted(
        m
        for m in _internal(imported(module, CORE_MODULES[module]))
        if any(m == a or m.startswith(a + ".") for a in ABOVE_THE_VARIABLES)
    )
    assert not above, f"{module} imports {above}"


#: the largest function and class of jit-core, in lines: a unit past them does several
#: things, and is split by responsibility before it grows further
MAX_FUNCTION_LINES = 100
MAX_CLASS_LINES = 400


def test_no_unit_of_jit_core_is_too_large_to_own():
    too_large = []
    for module, path in sorted(CORE_MODULES.items()):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            lines = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if lines > MAX_FUNCTION_LINES:
                    too_large.append(f"function {module}.{node.name}: {lines} lines")
            elif isinstance(node, ast.ClassDef) and lines > MAX_CLASS_LINES:
                too_large.append(f"class {module}.{node.name}: {lines} lines")
    assert not too_large, "\n".join(too_large)


def _target(module: str, path: str, node: ast.ImportFrom) -> str:
    """The absolute name of the module ``node`` imports from."""
    if not node.level:
        return node.module or ""
    parts = module.split(".") if path.endswith("__init__.py") else module.split(".")[:-1]
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _modules_of(module: str, path: str, node: ast.AST) -> Set[str]:
    """The modules an import statement imports: ``import a.b`` gives ``a.b``; ``from a
    import b`` gives ``a.b`` where that is a module of jit_core, else ``a``."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    assert isinstance(node, ast.ImportFrom)
    target = _target(module, path, node)
    return {
        f"{target}.{a.name}" if f"{target}.{a.name}" in CORE_MODULES else target for a in node.names
    }


def _module_level_imports(body: List[ast.stmt]) -> Iterator[ast.AST]:
    """The import statements that run when the module is imported (in its body and the
    blocks of its ``if`` and ``try`` statements, not under ``if TYPE_CHECKING:``)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            is_type_checking = isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
            if not is_type_checking:
                yield from _module_level_imports(node.body)
            yield from _module_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in [node.body, node.orelse, node.finalbody] + [h.body for h in node.handlers]:
                yield from _module_level_imports(block)


def test_no_function_imports_again_what_its_module_imports():
    """A function does not import, in its body, a module that its file already imports
    at module level: the module is loaded by then, and the name at module level is the
    one to use (an import in a function costs an import-machinery call per call, and
    stays there only where it breaks an import cycle or defers a heavy dependency)."""
    again = []
    for module, path in sorted(CORE_MODULES.items()):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        at_import: Set[str] = set()
        for node in _module_level_imports(tree.body):
            at_import |= _modules_of(module, path, node)
        seen: Set[int] = set()
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in seen:
                    seen.add(id(node))
                    for name in sorted(_modules_of(module, path, node) & at_import):
                        again.append(f"{path}:{node.lineno}: imports {name} again")
    assert not again, "\n".join(again)
