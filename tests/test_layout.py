"""The package's layering, read from its source: every import statement of
every module (function-level imports included), and no cycle among them."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "jaxemu"
PKG = "jaxemu"


def modules():
    """{module name: path} for every .py file of the package."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name, path, known):
    """The package modules that module ``name`` imports anywhere in its file.

    ``from X import y`` counts as importing X.y when that is a module, else X.
    Importing a module inside a subpackage first runs the subpackage's
    __init__, which counts too; the root package's __init__ (the public
    facade, importing everything) counts only where it is named.
    """
    is_pkg = path.name == "__init__.py"
    here = name if is_pkg else name.rpartition(".")[0]
    found = set()

    def add(mod):
        if mod not in known:
            return
        found.add(mod)
        parent = mod.rpartition(".")[0]
        while parent and parent != PKG:  # subpackage __init__ runs first
            found.add(parent)
            parent = parent.rpartition(".")[0]

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub in known else base)
    found.discard(name)
    return found


def graph():
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def find_cycle(g):
    """A list of modules forming an import cycle, or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in sorted(g[n]):
            if state.get(m) == "open":
                return stack[stack.index(m):] + [m]
            if m not in state:
                cyc = visit(m)
                if cyc:
                    return cyc
        state[n] = "done"
        stack.pop()
        return None

    for n in sorted(g):
        if n not in state:
            cyc = visit(n)
            if cyc:
                return cyc
    return None


def test_the_graph_is_read():
    g = graph()
    assert "jaxemu.primitive" in g["jaxemu.api"] and "jaxemu.auto" in g["jaxemu.primitive"]
    assert "jaxemu.backends.xla" in g["jaxemu.auto"] and "jaxemu.schemes" in g["jaxemu.backends.xla"]
    assert "jaxemu.backends" in g["jaxemu.backends.cuda_lowering"]  # relative "from . import"
    assert len(g) >= 20


def test_no_import_cycle():
    assert find_cycle(graph()) is None, " -> ".join(find_cycle(graph()))


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def reachable(g, start):
    seen, todo = set(), [start]
    while todo:
        for m in g[todo.pop()]:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


@pytest.mark.parametrize("lower, above", [
    # backends know only concrete schemes: nothing about auto, the primitive or the API
    ("jaxemu.backends", {"jaxemu.auto", "jaxemu.primitive", "jaxemu.api", "jaxemu.emulate", "jaxemu.costs"}),
    ("jaxemu.backends.xla", {"jaxemu.auto", "jaxemu.primitive", "jaxemu.api", "jaxemu.emulate", "jaxemu.costs"}),
    ("jaxemu.backends.cuda_lowering", {"jaxemu.auto", "jaxemu.primitive", "jaxemu.api", "jaxemu.emulate"}),
    # the cost model does not use the public API
    ("jaxemu.costs", {"jaxemu.api", "jaxemu.primitive", "jaxemu.emulate", "jaxemu.auto", PKG}),
    # auto sits above the backends and below the primitive
    ("jaxemu.auto", {"jaxemu.api", "jaxemu.primitive", "jaxemu.emulate", PKG}),
    ("jaxemu.schemes", {"jaxemu.backends", "jaxemu.auto", "jaxemu.primitive"}),
])
def test_layers(lower, above):
    assert not reachable(graph(), lower) & above
