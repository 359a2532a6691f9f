"""How livable the code is: long functions and import circles.

    python scripts/house_metrics.py [--limit 80] [--packages jit,trace,autograd]

Prints every function (or method) longer than ``--limit`` lines in the named
packages of ``symshape/`` (a layer's folder, its sub-packages included), longest
first, and the import circles among each layer's modules (named by their path
under it: ``frontend.api``): strongly connected groups of the graph whose edges are
``import``/``from ... import`` statements, counted twice: at module level
only, and with the late imports inside functions too (a late import breaks a
circle at load time, not in the design). Issue 36 measures the JIT's refactor
with it, before and after.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "symshape"


def long_functions(package: str, limit: int) -> list[tuple[int, str]]:
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    rel = path.relative_to(ROOT.parent)
                    out.append((n, f"{rel}:{node.lineno} {node.name}"))
    return sorted(out, reverse=True)


def _module_imports(path: Path, package: str, modules, late: bool) -> set[str]:
    """The ``modules`` of ``symshape.<package>`` (dotted names under it, sub-packages
    included) that ``path`` imports at module level (``late``: inside functions too)."""
    prefix = f"symshape.{package}."
    found = set()
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree) if late else tree.body:
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name.startswith(prefix):
                parts = name[len(prefix) :].split(".")
                # the longest prefix that is a module: a.b.c names module a.b or object c of it
                for i in range(len(parts), 0, -1):
                    if ".".join(parts[:i]) in modules:
                        found.add(".".join(parts[:i]))
                        break
    return found


def _modules(package: str) -> dict[str, Path]:
    """The modules of ``symshape/<package>`` by dotted name under it, sub-packages'
    included (``frontend.api``); package ``__init__`` files left out."""
    base = ROOT / package
    return {
        ".".join(p.relative_to(base).with_suffix("").parts): p
        for p in sorted(base.rglob("*.py"))
        if p.stem != "__init__"
    }


def import_circles(package: str, late: bool = False) -> list[list[str]]:
    files = _modules(package)
    graph = {m: _module_imports(p, package, files, late) for m, p in files.items()}
    return [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]


def _strongly_connected(graph: dict) -> list[list[str]]:
    """Tarjan's algorithm, iteratively."""
    index, low, stack, on, out = {}, {}, [], set(), []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    group.append(m)
                    if m == node:
                        break
                out.append(group)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=80)
    ap.add_argument("--packages", default="jit,trace,autograd")
    a = ap.parse_args()
    for package in a.packages.split(","):
        funcs = long_functions(package, a.limit)
        print(f"## symshape/{package}: {len(funcs)} functions over {a.limit} lines")
        for n, where in funcs:
            print(f"  {n:4d}  {where}")
        for late in (False, True):
            circles = import_circles(package, late)
            kind = "counting imports inside functions" if late else "module-level imports"
            print(f"## symshape/{package}: {len(circles)} import circle(s), {kind}")
            for c in circles:
                print(f"  {len(c)} modules: {', '.join(c)}")


if __name__ == "__main__":
    main()
