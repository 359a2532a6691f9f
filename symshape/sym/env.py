"""``ShapeEnv``: symbols, what is known about them, guards and runtime asserts.

    >>> env = ShapeEnv()
    >>> x = env.symbol("x", hint=10)         # backed: from a real input
    >>> env.guard(x > 4)                     # unknown statically: decided by the hint
    True
    >>> env.known(x >= 5), env.known(x != 5)
    (True, None)
    >>> env.guards
    [Guard(x >= 5)]
    >>> u = env.unbacked("u", min=0)         # data-dependent: no hint
    >>> env.check(u < x)                     # recorded as a runtime assert
    >>> env.known(u >= x)
    False

Decisions are three-valued (``known``); ``guard`` turns "unknown" into a
recorded guard for backed symbols and into a ``DataDependentError`` for
unbacked ones; ``check`` is the user's assertion of a fact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from symshape.sym import expr as E
from symshape.sym.errors import (
    CheckError,
    DataDependentError,
    InconsistentFactError,
    SymbolicZeroDivisionError,
)
from symshape.sym.expr import FloorDiv, Mod, Symbol
from symshape.sym.facts import Knowledge
from symshape.sym.guards import Guard, GuardFunction, RuntimeAssert, Violation, final_guards
from symshape.sym.logic import BoolExpr, _bool, not_
from symshape.sym.ranges import INF, Range, make_range
from symshape.sym.source import Location, unwinds, user_frame, user_location


@dataclass(frozen=True, slots=True)
class SymbolInfo:
    """What a ShapeEnv records about one symbol."""

    symbol: Symbol
    hint: int | None  # None for unbacked symbols
    declared: tuple  # the range given at creation
    source: str | None  # what the symbol stands for, e.g. "x.size(0)"
    index: int  # creation order
    where: Location | None
    rigid: bool = False  # stands for every value in its range: deciding on it is a violation

    @property
    def backed(self) -> bool:
        return self.hint is not None

    @property
    def label(self) -> str:
        return self.source or self.symbol.name


class ShapeEnv:
    """Symbols with value ranges and hints, the facts learned about them, and
    the guards and runtime asserts that make a trace valid."""

    def __init__(self) -> None:
        self._info: dict[Symbol, SymbolInfo] = {}
        self._hints: dict[Symbol, int] = {}
        self._k = Knowledge(rank=self._rank, backed=self._is_backed, rigid=self._is_rigid)
        self._rigid: set[Symbol] = set()
        self._violations: list[Violation] = []
        # ``on_data(kind, expr, where)``: a decision ("bool") or a value ("int") that
        # depends on unbacked symbols, answered by the tracer (which splits the trace
        # there) instead of a DataDependentError; what it answers is learned as a fact
        self.on_data = None
        self._recorded: list[Guard] = []
        self._asserts: list[RuntimeAssert] = []
        self._valid: set[int] = set()  # uids of expressions checked by _validate
        self._final: tuple | None = None

    # -- symbols -----------------------------------------------------------------
    def symbol(
        self,
        name: str,
        hint: int,
        min: int | None = 0,
        max: int | None = None,
        *,
        source: str | None = None,
        rigid: bool = False,
    ) -> Symbol:
        """A backed symbol: stands for a value seen on a real input (``hint``).

        A *rigid* symbol stands for every value in its range (``export``): a
        decision its range does not prove is recorded as a ``Violation``, not a
        guard, and tracing continues down the hint's path."""
        if isinstance(hint, bool) or not isinstance(hint, int):
            raise TypeError(
                f"the hint of symbol {name!r} must be an int (the size seen on the input), "
                f"found {type(hint).__name__}: {hint!r}"
            )
        rng = make_range(min, max)
        if not rng[0] <= hint <= rng[1]:
            raise ValueError(
                f"the hint {hint} of symbol {name!r} is outside its range [{rng[0]}, {rng[1]}]"
            )
        s = self._new(name, int(hint), rng, source, rigid)
        self._hints[s] = int(hint)
        if rigid:
            self._rigid.add(s)
        return s

    def unbacked(
        self,
        name: str,
        min: int | None = None,
        max: int | None = None,
        *,
        source: str | None = None,
    ) -> Symbol:
        """An unbacked symbol: a data-dependent value with no hint (``nonzero``'s count)."""
        return self._new(name, None, make_range(min, max), source)

    def _new(self, name, hint, rng, source, rigid: bool = False) -> Symbol:
        s = Symbol(name)
        if s in self._info:
            raise ValueError(f"a symbol named {name!r} already exists in this ShapeEnv")
        self._info[s] = SymbolInfo(s, hint, rng, source, len(self._info), user_location(), rigid)
        self._k.declare(s, rng)
        return s

    def info(self, s: Symbol) -> SymbolInfo:
        return self._info[s]

    @property
    def symbols(self) -> list[SymbolInfo]:
        return list(self._info.values())

    def _rank(self, s: Symbol) -> tuple:
        i = self._info.get(s)
        return (i is not None and i.hint is None, i.index if i else -1)

    def _is_backed(self, s: Symbol) -> bool:
        return s in self._hints

    def _is_rigid(self, s: Symbol) -> bool:
        return s in self._rigid

    def _all_rigid(self, cond) -> bool:
        rigid = self._rigid
        return bool(rigid) and all(v in rigid for v in cond.free_symbols)

    # -- reading ------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        """Changes whenever what is known may have changed: a cache of simplified
        values stays valid while the epoch is the same."""
        return self._k.epoch

    def simplify(self, x):
        """``x`` rewritten with everything known: replacements, ranges, divisibility."""
        if type(x) is int or type(x) is bool:
            return x
        self._validate(x)
        return self._k.simplify(x)

    def bounds(self, x) -> Range:
        """The tightest known range of an integer expression."""
        x = E._int(x)
        if type(x) is int:
            return Range(x, x)
        s = self.simplify(x)
        lo, hi = self._k.bounds(s)
        return Range(lo, hi)

    def known(self, cond) -> bool | None:
        """True or False when ``cond`` is decided by the facts; None otherwise.
        Records nothing and is never wrong."""
        cond = _bool(cond)
        if type(cond) is bool:
            return cond
        return self._k.decide(self.simplify(cond))

    def hint(self, x):
        """Value of ``x`` on the inputs the backed symbols came from."""
        s = self.simplify(x)
        if type(s) is int or type(s) is bool:
            return s
        missing = [v for v in s.free_symbols if v not in self._hints]
        if missing:
            raise self._data_dependent(x, s, user_location())
        return E.evaluate(s, self._hints)

    def evaluate(self, x, values: Mapping):
        """Value of ``x`` when symbols take ``values`` (keyed by Symbol or name)."""
        return E.evaluate(E._int(x) if not isinstance(x, (BoolExpr, bool)) else x, values)

    # -- deciding -------------------------------------------------------------------
    def guard(self, cond, where: Location | None = None) -> bool:
        """Decide ``cond``: statically when the facts allow; otherwise by the hints
        of backed symbols, recording a guard and learning from it. Raises
        ``DataDependentError`` when unbacked symbols leave it undecided."""
        cond = _bool(cond)
        if type(cond) is bool:
            return cond
        s = self.simplify(cond)
        r = self._k.decide(s)
        if r is not None:
            return r
        where = where or user_location()
        if any(v not in self._hints for v in s.free_symbols):
            if self.on_data is None:
                raise self._data_dependent(cond, s, where)
            value = bool(self.on_data("bool", s, where))
            self._learn(s if value else not_(s), where, "assert")
            return value
        value = bool(E.evaluate(s, self._hints))
        taken = s if value else not_(s)
        if self._all_rigid(s):
            self._violate(taken, where, "guard")
            return value
        self._recorded.append(Guard(taken, where))
        self._learn(taken, where, "guard")
        return value

    def specialize(self, x, where: Location | None = None) -> int:
        """The concrete value of ``x``, guarding that it stays so."""
        s = self.simplify(E._int(x))
        if type(s) is int:
            return s
        if self.on_data is not None and any(v not in self._hints for v in s.free_symbols):
            v = int(self.on_data("int", s, where or user_location()))
            self._learn(E._CMP["eq"](s, v), where, "assert")
            return v
        v = self.hint(s)
        self.guard(E._CMP["eq"](s, v), where)
        return v

    def check(
        self,
        cond,
        msg: str | None = None,
        where: Location | None = None,
        error: type[Exception] = CheckError,
    ) -> None:
        """The user asserts ``cond``. Provable: nothing is recorded. Only backed
        symbols: a guard (an error now if the hints violate it). Otherwise: a
        runtime assert, whose failure is also an ``error``. In every case the
        engine learns it."""
        cond = _bool(cond)
        where = where or user_location()
        if type(cond) is bool:
            if not cond:
                raise CheckError(_check_text("is false", cond, msg, where))
            return
        s = self.simplify(cond)
        r = self._k.decide(s)
        if r is True:
            return
        if r is False:
            raise CheckError(_check_text("can never hold given what is known", s, msg, where))
        if all(v in self._hints for v in s.free_symbols):
            if not E.evaluate(s, self._hints):
                values = ", ".join(
                    f"{v} = {self._hints[v]}" for v in sorted(s.free_symbols, key=str)
                )
                raise CheckError(_check_text(f"fails for this input ({values})", s, msg, where))
            if self._all_rigid(s):
                self._violate(s, where, "check")
                return
            self._recorded.append(Guard(s, where))
            self._learn(s, where, "guard")
            return
        self._asserts.append(RuntimeAssert(s, where, msg, error, unwinds(user_frame())))
        self._learn(s, where, "assert")

    def assume(self, cond, where: Location | None = None) -> None:
        """Learn ``cond`` as true by construction (what an op guarantees about the
        sizes it creates, e.g. ``u0 <= numel(x)`` for ``nonzero``): nothing is
        recorded, nothing is checked at run time."""
        cond = _bool(cond)
        if type(cond) is bool:
            if not cond:
                raise CheckError(f"cannot assume a false fact at {where}")
            return
        self._learn(self.simplify(cond), where, "declared")

    def _violate(self, taken, where, kind: str) -> None:
        """Record that the trace assumed ``taken`` of rigid symbols, then learn it,
        so that tracing goes on down the hint's path (and reports each fact once)."""
        self._violations.append(Violation(taken, where, kind))
        self._learn(taken, where, "violation")

    def _learn(self, cond, where, origin) -> None:
        try:
            self._k.learn(cond, where, origin)
        except InconsistentFactError as e:
            raise CheckError(
                _check_text(f"contradicts earlier facts ({e})", cond, None, where)
            ) from None
        self._final = None

    # -- output ---------------------------------------------------------------------
    @property
    def guards(self) -> list[Guard]:
        """The minimal guard list: none is implied by the others or the ranges."""
        key = (self._k.version, len(self._recorded))
        if self._final is None or self._final[0] != key:
            self._final = (key, final_guards(self))
        return list(self._final[1])

    @property
    def recorded_guards(self) -> list[Guard]:
        """Every guard in the order it was taken (before minimization)."""
        return list(self._recorded)

    @property
    def runtime_asserts(self) -> list[RuntimeAssert]:
        return list(self._asserts)

    @property
    def violations(self) -> list[Violation]:
        """Decisions on rigid symbols that their ranges do not prove, in order."""
        return list(self._violations)

    def guard_function(self) -> GuardFunction:
        """The guards compiled into one Python function of the backed symbols."""
        args = [i.symbol for i in self._info.values() if i.backed]
        return GuardFunction.build(self.guards, args)

    def describe(self, x) -> str:
        """``x`` printed with each symbol replaced by what it stands for."""
        return E.to_str(x, self._label)

    def _label(self, s: Symbol) -> str:
        i = self._info.get(s)
        return i.label if i is not None else s.name

    # -- validation -----------------------------------------------------------------
    def _validate(self, x) -> None:
        """Unknown symbols and possibly-zero divisors are errors, never answers.
        Facts only accumulate, so what was valid once stays valid."""
        valid = self._valid
        if x.uid in valid:
            return
        stack, seen = [x], []
        while stack:
            n = stack.pop()
            t = type(n)
            if t is int or t is bool or n.uid in valid:
                continue
            if t is Symbol:
                if n not in self._info:
                    raise KeyError(f"symbol {n.name} does not belong to this ShapeEnv")
            elif (t is FloorDiv or t is Mod) and type(n.b) is not int:
                self._check_divisor(n)
            seen.append(n.uid)
            stack.extend(n.children())
        valid.update(seen)

    def _check_divisor(self, n) -> None:
        divisor = self._k.simplify(n.b)
        if self._k.decide(self._k.simplify(E._CMP["ne"](divisor, 0))) is not True:
            lo, hi = self._k.bounds(divisor)
            op = "//" if type(n) is FloorDiv else "%"
            raise SymbolicZeroDivisionError(
                f"`{self.describe(n)}`: the divisor `{self.describe(n.b)}` may be zero "
                f"(its range is [{_b(lo)}, {_b(hi)}]). Expected a divisor known to be "
                f"nonzero; say so before dividing with `{op}`, e.g. "
                f"`symshape.check({n.b} != 0)` (or `> 0`)."
            )

    def _data_dependent(self, cond, s, where) -> DataDependentError:
        unbacked = sorted((v for v in s.free_symbols if v not in self._hints), key=str)
        is_cond = isinstance(s, BoolExpr)
        what = "decide" if is_cond else "compute the value of"
        lines = [f"Could not {what} `{cond}` while tracing: it depends on data-dependent values."]
        if s is not cond:
            lines.append(f"  (simplified: `{s}`)")
        for v in unbacked:
            i = self._info[v]
            origin = f" from {i.source}" if i.source else ""
            at = f" at {i.where}" if i.where else ""
            lines.append(f"  {v.name}: known only at run time{origin}{at}")
            if i.where is not None and i.where.line:
                lines.append(f"      {i.where.line}")
        if where is not None:
            lines.append(f"It was needed at {where.describe()}")
        if is_cond:
            yes, no = E.to_str(s), E.to_str(not_(s))
            lines.append(
                "If you know which way it goes, say so before that line, e.g.\n"
                f"    symshape.check({yes})\nor\n    symshape.check({no})\n"
                "(with the Python values your code has for these symbols); otherwise compute "
                "without branching on it, e.g. with torch.where."
            )
        else:
            lines.append(
                "If it can take only one value, say so before that line, e.g.\n"
                f"    symshape.check({E.to_str(s)} == 1)\n"
                "otherwise keep it symbolic instead of converting it to a Python int."
            )
        return DataDependentError("\n".join(lines), expr=cond, location=where)


def _b(v) -> str:
    return "inf" if v == INF else "-inf" if v == -INF else str(v)


def _check_text(what: str, cond, msg, where) -> str:
    text = f"check `{cond}` {what}"
    if msg:
        text += f": {msg}"
    if where is not None:
        text += f"\n  at {where.describe()}"
    return text


__all__ = ["ShapeEnv", "SymbolInfo"]
