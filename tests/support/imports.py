"""ptui's own import graph, read from the source (every import statement: at module top, inside a
function, or under `if TYPE_CHECKING:`, where a type still ties two modules), for the layer and
cycle checks."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "ptui"


def modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = f.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def _targets(mods: dict[str, Path], mod: str, node) -> list[str]:
    pkg = mod if mods[mod].name == "__init__.py" else mod.rsplit(".", 1)[0]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = pkg.split(".")[:len(pkg.split(".")) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    # `from pkg import submodule` runs pkg's __init__ too (a façade there ties the two): both count
    return [t for a in node.names
            for t in ((f"{target}.{a.name}", target) if f"{target}.{a.name}" in mods else (target,))]


def graph() -> dict[str, set[str]]:
    """module -> the ptui modules it imports (itself excluded)."""
    mods = modules()
    g: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        tree = ast.parse(f.read_text(), str(f))
        for n in ast.walk(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                for t in _targets(mods, m, n):
                    while t and t not in mods:          # `import ptui.core.x.y` counts as its module
                        t = t.rpartition(".")[0]
                    if t and t != m:
                        g[m].add(t)
    return g


def function_level() -> list[tuple[str, str, int]]:
    """(module, the ptui module it imports, line) of each import of ptui's own modules written
    inside a function (issue 24: internal imports go at the module's top)."""
    mods = modules()
    out = []
    for m, f in sorted(mods.items()):
        tree = ast.parse(f.read_text(), str(f))
        seen: set[int] = set()
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for n in ast.walk(fn):
                if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in seen:
                    seen.add(id(n))
                    got = set()
                    for t in _targets(mods, m, n):
                        while t and t not in mods:
                            t = t.rpartition(".")[0]
                        if t and t.split(".")[0] == "ptui":
                            got.add(t)
                    # `from .. import core` names ptui.core, not also the package it is in
                    out += [(m, t, n.lineno) for t in sorted(got)
                            if not any(u.startswith(t + ".") for u in got)]
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out
