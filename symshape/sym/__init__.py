"""Layer 1: the symbolic integer engine. Pure Python; never imports torch.

>>> from symshape.sym import ShapeEnv
>>> env = ShapeEnv()
>>> a = env.symbol("a", hint=2, min=2)
>>> env.known(a * 3 > a)
True
"""

from symshape.sym.env import ShapeEnv, SymbolInfo
from symshape.sym.errors import (
    CheckError,
    DataDependentError,
    InconsistentFactError,
    SymbolicError,
    SymbolicZeroDivisionError,
)
from symshape.sym.expr import (
    Expr,
    FloorDiv,
    IntLike,
    Max,
    Min,
    Mod,
    Mono,
    Sum,
    Symbol,
    add,
    ceildiv,
    evaluate,
    floordiv,
    free_symbols,
    lin,
    mod,
    mul,
    pow_,
    sub,
    substitute,
    sym_max,
    sym_min,
    to_str,
)
from symshape.sym.guards import Guard, GuardFunction, RuntimeAssert
from symshape.sym.logic import (
    And,
    BoolExpr,
    BoolLike,
    Or,
    Rel,
    and_,
    eq,
    ge,
    gt,
    le,
    lt,
    ne,
    not_,
    or_,
)
from symshape.sym.ranges import Range
from symshape.sym.source import Location, user_location

__all__ = [
    "And",
    "BoolExpr",
    "BoolLike",
    "CheckError",
    "DataDependentError",
    "Expr",
    "FloorDiv",
    "Guard",
    "GuardFunction",
    "InconsistentFactError",
    "IntLike",
    "Location",
    "Max",
    "Min",
    "Mod",
    "Mono",
    "Or",
    "Range",
    "Rel",
    "RuntimeAssert",
    "ShapeEnv",
    "Sum",
    "Symbol",
    "SymbolInfo",
    "SymbolicError",
    "SymbolicZeroDivisionError",
    "add",
    "and_",
    "ceildiv",
    "eq",
    "evaluate",
    "floordiv",
    "free_symbols",
    "ge",
    "gt",
    "le",
    "lin",
    "lt",
    "mod",
    "mul",
    "ne",
    "not_",
    "or_",
    "pow_",
    "sub",
    "substitute",
    "sym_max",
    "sym_min",
    "to_str",
    "user_location",
]
