"""Guards and runtime asserts, the minimal guard list, and its Python form.

The final list is built from what the engine *knows*, not from the order
guards were taken, so a guard implied by a later one disappears::

    x >= 5          # from guard(x > 4), then guard(x > 2) adds nothing
    b == 2*a        # a replacement
    a % 8 == 0      # a divisibility
    a + 1 <= b      # a relation, kept only if nothing else implies it

and compiles into one function of the backed symbols::

    def guards(a, b, x):
        return x >= 5 and b == 2*a and a % 8 == 0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from symshape.sym import expr as E
from symshape.sym.expr import Symbol
from symshape.sym.logic import _rel
from symshape.sym.ranges import INF, round_to_multiple


@dataclass(frozen=True, slots=True)
class Guard:
    """A condition a trace assumes of its inputs, and the user line that needed it."""

    cond: object  # BoolExpr
    where: object = None  # Location | None

    def __repr__(self) -> str:
        return f"Guard({self.cond})"

    def text(self, name: Callable[[Symbol], str] = E._default_name) -> str:
        """``x.size(0) >= 2  # model.py:42`` when ``name`` maps symbols to sources."""
        s = E.to_str(self.cond, name)
        return f"{s}  # {self.where}" if self.where is not None else s


@dataclass(frozen=True, slots=True)
class RuntimeAssert:
    """A condition on data-dependent values, checked when the trace runs.

    ``error`` is the exception type the program raises without symshape when
    ``cond`` fails (``IndexError`` for an index out of range, ``RuntimeError``
    for most size checks, ``CheckError`` for ``check``); the failure raised at
    run time is an instance of it. ``None``: symshape's own error only."""

    cond: object
    where: object = None
    msg: str | None = None
    error: type | None = None
    # raised where the program's `with` exits or `finally` blocks run on the way out
    unwinds: bool = False

    def __repr__(self) -> str:
        return f"RuntimeAssert({self.cond})"


@dataclass(frozen=True, slots=True)
class Violation:
    """A decision on rigid symbols that their declared ranges do not prove:
    tracing assumed ``cond`` (true for the hints), where the program must work
    for every value. ``kind``: ``"guard"`` (a branch, an op's requirement) or
    ``"check"`` (``symshape.check``)."""

    cond: object  # BoolExpr
    where: object = None  # Location | None
    kind: str = "guard"

    def __repr__(self) -> str:
        return f"Violation({self.cond})"


def final_guards(env) -> list[Guard]:
    """The minimal guards over backed symbols, from the engine's facts."""
    k = env._k
    backed = [i for i in env.symbols if i.backed]
    is_backed = env._is_backed
    out: list[Guard] = []

    def only_backed(x) -> bool:
        return all(is_backed(v) for v in E.free_symbols(x))

    for info in backed:  # replacements: b == 2*a, s == 5
        s = info.symbol
        if s in k.repl and only_backed(k.repl[s]):
            out.append(Guard(_rel("==", E.sub(s, k.repl[s])), k.repl_prov[s].where))
    for info in backed:  # ranges tighter than declared
        s = info.symbol
        if s in k.repl:
            continue
        (lo, hi), (dlo, dhi) = k.ranges[s], info.declared
        if s in k.div:  # the declared range, rounded by the divisibility guard
            dlo, dhi = round_to_multiple((dlo, dhi), k.div[s])
        prov = k.range_prov.get(s, [None, None])
        if lo > dlo:
            out.append(Guard(_rel("<=", E.sub(lo, s)), prov[0] and prov[0].where))
        if hi < dhi:
            out.append(Guard(_rel("<=", E.sub(s, hi)), prov[1] and prov[1].where))
    for t, (lo, hi) in list(k.ranges.items()):  # ranges of compound terms: x // 2 >= 3
        if type(t) is Symbol or not only_backed(t):
            continue
        stored = k.ranges.pop(t)
        k._reset_caches()
        try:
            clo, chi = k.bounds(t)
        finally:
            k.ranges[t] = stored
            k._reset_caches()
        prov = k.range_prov.get(t, [None, None])
        if lo > clo and lo != -INF:
            out.append(Guard(_rel("<=", E.sub(lo, t)), prov[0] and prov[0].where))
        if hi < chi and hi != INF:
            out.append(Guard(_rel("<=", E.sub(t, hi)), prov[1] and prov[1].where))
    for x, m in k.div.items():  # divisibility
        if only_backed(x):
            out.append(Guard(_rel("==", E.mod(x, m)), k.div_prov[x].where))
    # Relations not implied by everything else. One at a time, and a dropped one
    # stays out while the rest are tested: two relations that imply each other
    # must not both go.
    dropped: list = []
    for f in list(k.rels):
        if not only_backed(f.cond):
            continue
        with k.without(*dropped, f):
            implied = k.decide(f.cond) is True
        if implied:
            dropped.append(f)
        else:
            out.append(Guard(f.cond, f.where))
    return out


@dataclass(frozen=True)
class GuardFunction:
    """The guards as one Python function ``fn(*symbol_values) -> bool``."""

    fn: Callable[..., bool]
    source: str
    args: tuple[Symbol, ...]
    guards: tuple[Guard, ...]

    def __call__(self, *values: int) -> bool:
        return self.fn(*values)

    @staticmethod
    def build(guards: list[Guard], args: list[Symbol]) -> GuardFunction:
        names = [a.name for a in args]
        body = " and ".join(_wrap(E.to_str(g.cond)) for g in guards) or "True"
        src = f"def guards({', '.join(names)}):\n    return {body}\n"
        ns: dict = {}
        exec(compile(src, "<symshape guards>", "exec"), ns)
        return GuardFunction(ns["guards"], src, tuple(args), tuple(guards))

    def failing(self, values: Mapping) -> list[Guard]:
        """The guards that ``values`` (Symbol or name -> int) violate."""
        return [g for g in self.guards if not E.evaluate(g.cond, values)]


def _wrap(s: str) -> str:
    return f"({s})" if " or " in s else s
