"""The engine's rewrite rules as data: each identity as it appears in the
engine's comments, the formula before and after (Python source over the
symbols x, y, z and constants), and where it holds.

``test_expr.py`` checks that the engine rewrites ``before`` into exactly
``after`` and that the two agree with Python on sampled values;
``test_z3.py`` proves each identity for all integers.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Rule:
    identity: str  # the engine's comment
    before: str  # the original formula, Python source
    after: str  # what the engine must build, Python source
    consts: dict = field(default_factory=dict)  # constant name -> values to try
    where: str = "True"  # over symbols and constants: when the identity holds
    facts: tuple = ()  # conditions learned by a ShapeEnv first (decide.py rules)
    kind: str = "int"  # "int" or "bool"


POS = (1, 2, 3, 4, 5, 7, 8, 12)
NEG = (-1, -2, -3, -5, -8)
ANY = (-7, -3, -2, -1, 0, 1, 2, 5, 9)

EXPR_RULES = [
    # -- arithmetic folds and polynomial normal form (expr.py: add/mul/pow_) -----------
    Rule("x + 0 -> x", "x + 0", "x"),
    Rule("x*1 -> x", "x * 1", "x"),
    Rule("x*0 -> 0", "x * 0", "0"),
    Rule("(x + y)*2 - y -> 2*x + y", "(x + y) * 2 - y", "2*x + y"),
    Rule("(x + y)*(x - y) -> x**2 - y**2", "(x + y) * (x - y)", "x**2 - y**2"),
    Rule("(x + c)**2 -> x**2 + 2*c*x + c**2", "(x + c) ** 2", "x*x + 2*c*x + c*c", {"c": ANY}),
    Rule("x*y - y*x -> 0", "x * y - y * x", "0"),
    # -- floor division (expr.py: floordiv, _floordiv_const) ---------------------------
    Rule("x // 1 -> x", "x // 1", "x"),
    Rule("a // b == (-a) // (-b)", "(x + 2*y) // n", "(-x - 2*y) // (-n)", {"n": NEG}),
    Rule("b // b -> 1", "(x*y + 3) // (x*y + 3)", "1", where="x*y + 3 != 0"),
    Rule("0 // b -> 0", "0 // (x + y)", "0", where="x + y != 0"),
    Rule(
        "(b*q + r) // b -> q + r // b",
        "(x*y*z + 2*x*y + z) // (x*y)",
        "z + 2 + z // (x*y)",
        where="x*y != 0",
    ),
    Rule(
        "(n*q + r) // n -> q + r // n",
        "(n*x + k*y + c) // n",
        "x + (k*y + c) // n",
        {"n": POS, "k": (1, 2, 3, 5, 7, -1, -4), "c": ANY},
    ),
    Rule(
        "rc // n == 0 because 0 <= rc < n",
        "(n*x + c) // n",
        "x",
        {"n": POS, "c": (0, 1, 2, 3)},
        where="c < n",
    ),
    Rule(
        "(g*r) // (g*m) -> r // m",
        "(g*x + g*c) // (g*m)",
        "(x + c) // m",
        {"g": (2, 3, 4), "m": (2, 3, 5), "c": (1, -1)},
    ),
    Rule(
        "r // n == 0 (0 <= r < n by %)",
        "(x % m + c) // n",
        "0",
        {"m": (2, 3, 4), "n": (5, 8), "c": (0, 1)},
    ),
    Rule("(x // m) // n -> x // (m*n)", "(x // m) // n", "x // (m*n)", {"m": POS, "n": POS}),
    Rule(
        "(x // m + c) // n -> (x + c*m) // (m*n)",
        "(x // m + c) // n",
        "(x + c*m) // (m*n)",
        {"m": (2, 3, 4), "n": (2, 3, 5), "c": (1, -1, 3)},
    ),
    Rule("(a*4 + 2)//2 -> 2*a + 1", "(x*4 + 2) // 2", "2*x + 1"),
    # -- modulo (expr.py: mod, _mod_const) ----------------------------------------------
    Rule("x % 1 -> 0", "x % 1", "0"),
    Rule("x % -1 -> 0", "(x + y) % -1", "0"),
    Rule("x % x -> 0", "(x + y) % (x + y)", "0", where="x + y != 0"),
    Rule("a % -n == -((-a) % n)", "(x + 2*y) % n", "-((-x - 2*y) % (-n))", {"n": NEG}),
    Rule("(b*q + r) % b -> r % b", "(x*y*z + 2*x*y + z) % (x*y)", "z % (x*y)", where="x*y != 0"),
    Rule(
        "(x % (k*n)) % n -> x % n", "(x % (k*n)) % n", "x % n", {"k": (1, 2, 3), "n": (2, 3, 4, 8)}
    ),
    Rule(
        "(n*q + r) % n -> r % n",
        "(n*x + k*y + c) % n",
        "((k % n)*y + c % n) % n",
        {"n": (2, 3, 5, 8), "k": (1, 2, 3, 7, -1, -4), "c": ANY},
    ),
    Rule(
        "(g*y) % (g*m) -> g * (y % m)",
        "(g*x + g*c) % (g*m)",
        "g * ((x + c) % m)",
        {"g": (2, 3, 4), "m": (2, 3, 5), "c": (1, -1)},
    ),
    Rule("x % n -> x when 0 <= x < n", "(x % m) % n", "x % m", {"m": (2, 3, 4), "n": (5, 8)}),
    Rule(
        "x % n -> x when 0 <= x < n (up to the boundary)",
        "(x % m + c) % n",
        "x % m + c",
        {"m": (2, 3, 4), "n": (4, 5, 8), "c": (0, 1, 2, 3, 4, 5, 6)},
        where="m - 1 + c < n",
    ),
    Rule(
        "x % n stays when x may reach n",
        "(x % m + c) % n",
        "(x % m + c) % n",
        {"m": (2, 3, 4), "n": (4, 5), "c": (1, 2, 3, 4)},
        where="m - 1 + c >= n and c < n",
    ),
    Rule("(2*x) % 2 -> 0", "(x + x) % 2", "0"),
    # -- ceil division (expr.py: ceildiv) ----------------------------------------------
    Rule(
        "ceil(a/n) == (a + n - 1) // n", "ceildiv(x + 2*y, n)", "(x + 2*y + n - 1) // n", {"n": POS}
    ),
    Rule("ceil(a/b) == -((-a) // b)", "ceildiv(x, y)", "-((-x) // y)", where="y != 0"),
    Rule("ceil(a/b) == -((-a) // b) for b < 0", "ceildiv(x, n)", "-((-x) // n)", {"n": NEG}),
    # -- max / min (expr.py: _minmax) --------------------------------------------------
    Rule("max(x, x + k) -> x + k", "max(x, x + k)", "x + k", {"k": (1, 2, 5)}),
    Rule("max(x, x - k) -> x", "max(x, x - k)", "x", {"k": (1, 2, 5)}),
    Rule("min(x, x + k) -> x", "min(x + k, x)", "x", {"k": (1, 2, 5)}),
    Rule("max(x, x) -> x", "max(x + y, x + y)", "x + y"),
    Rule("max(max(x, y), z) -> max(x, y, z)", "max(max(x, y), z)", "max(x, y, z)"),
    Rule("max(x, c1, c2) -> max(x, max(c1, c2))", "max(x, c, 3)", "max(x, max(c, 3))", {"c": ANY}),
    Rule("max(c1, c2) -> c", "max(c, 4) + min(c, 4)", "c + 4", {"c": ANY}),
]

BOOL_RULES = [
    # -- comparisons (logic.py: _rel, lt, le, not_) ------------------------------------
    Rule("a < b <-> a - b + 1 <= 0", "x < y", "x - y + 1 <= 0", kind="bool"),
    Rule("a > b <-> b < a", "x > y", "y < x", kind="bool"),
    Rule("a >= b <-> b <= a", "x >= y + 3", "y + 3 <= x", kind="bool"),
    Rule(
        "g*p + c <= 0  <->  p + ceil(c/g) <= 0",
        "g*x + g*y + c <= 0",
        "x + y + (-((-c) // g)) <= 0",
        {"g": (2, 3, 4), "c": ANY},
        kind="bool",
    ),
    Rule(
        "g*p == -c has no integer solution",
        "g*x + g*y + c == 0",
        "False",
        {"g": (2, 3, 4), "c": (1, 5, -7)},
        where="c % g != 0",
        kind="bool",
    ),
    Rule(
        "g*p + c == 0 <-> p + c/g == 0 when g | c",
        "g*x - g*y + g*c == 0",
        "x - y + c == 0",
        {"g": (2, 3, -4), "c": ANY},
        kind="bool",
    ),
    Rule("e == 0 <-> -e == 0", "-x + 2*y == 3", "x - 2*y == -3", kind="bool"),
    Rule("e != 0 <-> -e != 0", "2*y - x != 3", "x - 2*y != -3", kind="bool"),
    Rule(
        "e <= 0 is True when 0 <= e's % terms bound it",
        "x % n <= n - 1",
        "True",
        {"n": POS},
        kind="bool",
    ),
    Rule(
        "e <= 0 is False when e > 0 by its % terms",
        "x % n + 1 <= 0",
        "False",
        {"n": POS},
        kind="bool",
    ),
    Rule("e == 0 is False outside e's % bounds", "x % n == n", "False", {"n": POS}, kind="bool"),
    Rule(
        "not e <= 0 <-> -e + 1 <= 0", "not_(x + 2*y <= 5)", "-(x + 2*y - 5) + 1 <= 0", kind="bool"
    ),
    Rule("not e == 0 <-> e != 0", "not_(x == y)", "x != y", kind="bool"),
    Rule("not e != 0 <-> e == 0", "not_(x != y)", "x == y", kind="bool"),
    Rule(
        "not (p and q) <-> not p or not q",
        "not_(and_(x < y, y < z))",
        "or_(x >= y, y >= z)",
        kind="bool",
    ),
    Rule(
        "not (p or q) <-> not p and not q",
        "not_(or_(x < y, y == z))",
        "and_(x >= y, y != z)",
        kind="bool",
    ),
    Rule("x and False -> False", "and_(x < y, False)", "False", kind="bool"),
    Rule("x or True -> True", "or_(x < y, True)", "True", kind="bool"),
    Rule("x and True -> x", "and_(x < y, True)", "x < y", kind="bool"),
    Rule("x and not x -> False", "and_(x < y, x >= y)", "False", kind="bool"),
    Rule("x or not x -> True", "or_(x == y + z, x != y + z)", "True", kind="bool"),
    Rule(
        "(p and q) and r -> p and q and r",
        "and_(and_(x < y, y < z), z < 5)",
        "and_(x < y, y < z, z < 5)",
        kind="bool",
    ),
]

# Rules that need facts: a ShapeEnv learns ``facts`` (x, y, z unbacked, any
# integer), then ``env.simplify(before)`` must be ``after``.
DECIDE_RULES = [
    Rule("0 <= a < b -> a // b == 0", "x // y", "0", facts=("x >= 0", "x < y")),
    Rule("0 <= a < b -> a % b == a", "x % y", "x", facts=("x >= 0", "x < y")),
    Rule(
        "a // n -> k when a in [k*n, (k+1)*n)",
        "x // n",
        "k",
        {"n": (2, 3, 8), "k": (0, 1, -2)},
        facts=("x >= k*n", "x < (k + 1)*n"),
    ),
    Rule(
        "a == c (mod g) and b | g -> a % b == c % b",
        "(x + c) % n",
        "c % n",
        {"n": (2, 4, 8), "c": (0, 1, 3, -5)},
        facts=("x % 8 == 0",),
    ),
    Rule(
        "a % n -> a - k*n on [k*n, (k+1)*n)",
        "x % n",
        "x - k*n",
        {"n": (3, 8), "k": (0, 2, -1)},
        facts=("x >= k*n", "x < (k + 1)*n"),
    ),
    Rule("max(x, y) -> y when x <= y is known", "max(x, y)", "y", facts=("x <= y",)),
    Rule(
        "min(x, y) -> x when x <= y is known",
        "min(y, x) + max(x, y + 1)",
        "x + y + 1",
        facts=("x <= y",),
    ),
    Rule(
        "k*(x // n) -> (k/n)*(x - c) when n | k and x % n == c",
        "k * ((x + c) // n)",
        "(k // n) * x",
        {"n": (2, 4, 8), "k": (8, 16, -8), "c": (0,)},
        facts=("x % 8 == 0",),
    ),
    Rule(
        "(x // m) // n -> x // (m*n) for n >= 1",
        "(x // z) // y",
        "x // (z*y)",
        facts=("y >= 1", "z != 0"),
    ),
    Rule(
        "a == c (mod g) for a stored divisibility of a sum",
        "(x + 3) % 2 + (x + 7) % 4",
        "0",
        facts=("(x + 3) % 4 == 0",),
    ),
    Rule("x == 2*(x // 2) when x % 2 == 0", "2 * (x // 2)", "x", facts=("x % 2 == 0",)),
    Rule("b -> a after b == a", "y * 3 + x", "4 * x", facts=("y == x",)),
    Rule("b -> 2*a after b == 2*a", "y // 2 + y % 2", "x", facts=("y == 2*x",)),
    Rule("u -> 0 after u == 0", "max(x, 0) + y", "max(x, 0)", facts=("y == 0",)),
]
