"""Random integer expression trees, built two ways: through the engine
(canonical form) and as plain Python source (the reference semantics).

A tree is a nested tuple: ``("sym", name)``, ``("const", k)`` or
``(op, child, ...)`` with op in ``+ - * // % max min ceildiv neg pow``.
"""

from __future__ import annotations

from hypothesis import strategies as st

from symshape.sym import ceildiv, sym_max, sym_min

BINARY = ("+", "-", "*", "//", "%", "max", "min", "ceildiv")


SMALL = st.integers(-6, 6)


def trees(names, max_leaves=12, divisors=None, const=SMALL):
    """Trees over ``names``. ``divisors``: a strategy for the right operand of
    ``//``, ``%`` and ``ceildiv`` (default: any subtree)."""
    leaf = st.one_of(
        st.sampled_from(names).map(lambda n: ("sym", n)),
        const.map(lambda k: ("const", k)),
    )

    def extend(sub):
        div = sub if divisors is None else divisors
        return st.one_of(
            st.tuples(st.sampled_from(("+", "-", "*", "max", "min")), sub, sub),
            st.tuples(st.sampled_from(("//", "%", "ceildiv")), sub, div),
            st.tuples(st.just("neg"), sub),
            st.tuples(st.just("pow"), sub, st.integers(0, 3)),
        )

    return st.recursive(leaf, extend, max_leaves=max_leaves)


def build(tree, syms):
    """The engine's expression for ``tree``; ``syms`` maps names to Symbols."""
    op = tree[0]
    if op == "sym":
        return syms[tree[1]]
    if op == "const":
        return tree[1]
    if op == "neg":
        return -build(tree[1], syms)
    if op == "pow":
        return build(tree[1], syms) ** tree[2]
    a, b = build(tree[1], syms), build(tree[2], syms)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    if op == "max":
        return sym_max(a, b)
    if op == "min":
        return sym_min(a, b)
    if op == "ceildiv":
        return ceildiv(a, b)
    raise AssertionError(op)


def pysrc(tree) -> str:
    """Fully parenthesized Python source for ``tree``: the reference semantics."""
    op = tree[0]
    if op == "sym":
        return tree[1]
    if op == "const":
        return f"({tree[1]})"
    if op == "neg":
        return f"(-{pysrc(tree[1])})"
    if op == "pow":
        return f"({pysrc(tree[1])} ** {tree[2]})"
    a, b = pysrc(tree[1]), pysrc(tree[2])
    if op in ("max", "min"):
        return f"{op}({a}, {b})"
    if op == "ceildiv":
        return f"(-((-{a}) // {b}))"
    return f"({a} {op} {b})"


def compile_fn(src: str, names):
    """``lambda *names: src`` as a real Python function."""
    return eval(f"lambda {', '.join(names)}: {src}", {"max": max, "min": min})


def size(tree) -> int:
    return (
        1
        if tree[0] in ("sym", "const")
        else 1 + sum(size(c) for c in tree[1:] if isinstance(c, tuple))
    )
