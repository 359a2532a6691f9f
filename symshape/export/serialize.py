"""Traces, expressions and values as JSON, and back, without ``eval``.

Values are JSON scalars or one-key objects naming their type::

    3, 2.5, "mean", null, true               # int, float, str, None, bool
    {"var": "t3"}                            # an SSA name
    {"tuple": [...]}, {"list": [...]}        # sequences
    {"dtype": "float32"}, {"device": "cpu"}  # torch constants, from fixed tables
    {"float": "inf"}, {"slice": [a, b, c]}, {"ellipsis": true}, ...

Expressions are a small AST rebuilt through the engine's constructors
(``{"sum": [1, [[{"s": "batch"}, 2]]]}`` is ``2*batch + 1``). Ops are named
and resolved through the op registry on load. Every name that generated code
will contain is checked to be a plain identifier; anything unexpected raises
``FormatError`` saying where in the file it is.
"""

from __future__ import annotations

import dataclasses
import keyword
import math

import torch

from symshape.ir import ASSERT, CONST, SYM, Node, TensorMeta, Trace, Var
from symshape.ir.printer import RESERVED
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.sym.errors import CheckError
from symshape.sym.guards import RuntimeAssert
from symshape.sym.source import Location


class FormatError(ValueError):
    """A saved program is malformed, tampered with, or needs what this symshape lacks."""


class SaveError(ValueError):
    """A program holds something the file format cannot represent."""


DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.complex64,
        torch.complex128,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
        torch.uint16,
        torch.uint32,
        torch.uint64,
        torch.float8_e4m3fn,
        torch.float8_e5m2,
    )
}
MEMORY_FORMATS = {
    "contiguous_format": torch.contiguous_format,
    "channels_last": torch.channels_last,
    "channels_last_3d": torch.channels_last_3d,
    "preserve_format": torch.preserve_format,
}
LAYOUTS = {"strided": torch.strided}
# what a failed runtime assert is also an instance of (``RuntimeAssert.error``)
ERRORS = {
    e.__name__: e
    for e in (
        RuntimeError,
        IndexError,
        ValueError,
        TypeError,
        AssertionError,
        NotImplementedError,
        ZeroDivisionError,
        CheckError,
    )
}
_OPERATOR_REFS = ("add", "sub", "mul", "truediv", "pow", "mod", "floordiv")


def _refs() -> dict:
    """The IR's own callables that are not registry ops, by (name, source)."""
    from symshape.jit.frontend.tracer import _SIZE
    from symshape.trace.context import operator_ref

    refs = {(_SIZE.name, _SIZE.source): _SIZE}
    for fn in _OPERATOR_REFS:
        r = operator_ref(fn)
        refs[(r.name, r.source)] = r
        refs[(fn, r.source)] = r  # files written before the py_ prefix
    return refs


def check_name(name, what: str) -> str:
    """``name`` if generated code may contain it: an identifier, no keyword, no
    leading underscore (the namespace of generated aliases), not reserved."""
    if (
        not isinstance(name, str)
        or not name.isidentifier()
        or not name.isascii()
        or keyword.iskeyword(name)
        or name.startswith("_")
        or name in RESERVED
        or name in ("args", "kwargs")
    ):
        raise FormatError(f"{what}: {name!r} is not an allowed name")
    return name


def check_text(s, what: str) -> str:
    if not isinstance(s, str) or not s.isprintable():
        raise FormatError(f"{what}: expected printable text, found {s!r}")
    return s


def check_int(v, what: str) -> int:
    if type(v) is not int:
        raise FormatError(f"{what}: expected an int, found {v!r}")
    return v


# -- expressions -----------------------------------------------------------------------------


def enc_expr(x):
    t = type(x)
    if t is int or t is bool:
        return x
    if t is E.Symbol:
        return {"s": x.name}
    if t is E.Sum:
        return {"sum": [x.const, [[enc_expr(a), k] for a, k in x.terms]]}
    if t is E.Mono:
        return {"mono": [[enc_expr(a), p] for a, p in x.factors]}
    if t is E.FloorDiv:
        return {"fdiv": [enc_expr(x.a), enc_expr(x.b)]}
    if t is E.Mod:
        return {"mod": [enc_expr(x.a), enc_expr(x.b)]}
    if t is E.Max or t is E.Min:
        return {t.__name__.lower(): [enc_expr(a) for a in x.args]}
    if t is L.Rel:
        return {"rel": [x.op, enc_expr(x.lhs)]}
    if t is L.And or t is L.Or:
        return {t.__name__.lower(): [enc_expr(a) for a in x.args]}
    raise SaveError(f"cannot save the expression {x!r} ({t.__name__})")


def dec_expr(j, what: str = "expression"):
    try:
        return _dec_expr(j, what)
    except (ZeroDivisionError, RecursionError, TypeError, ValueError) as e:
        if isinstance(e, FormatError):
            raise
        raise FormatError(f"{what}: not a valid expression ({type(e).__name__}: {e})") from None


def _dec_expr(j, what):
    if type(j) is int or type(j) is bool:
        return j
    if not isinstance(j, dict) or len(j) != 1:
        raise FormatError(f"{what}: expected an expression node, found {j!r:.80}")
    ((k, v),) = j.items()
    d = lambda x: _dec_expr(x, what)  # noqa: E731
    if k == "s":
        return E.Symbol(check_name(v, what))
    if k == "sum":
        c, terms = v
        r = check_int(c, what)
        for a, coef in terms:
            r = E.add(r, E.scale(d(a), check_int(coef, what)))
        return r
    if k == "mono":
        r = 1
        for a, p in v:
            r = E.mul(r, E.pow_(d(a), check_int(p, what)))
        return r
    if k in ("fdiv", "mod"):
        a, b = v
        return (E.floordiv if k == "fdiv" else E.mod)(d(a), d(b))
    if k in ("max", "min"):
        return (E.sym_max if k == "max" else E.sym_min)(*(d(a) for a in v))
    if k == "rel":
        op, lhs = v
        if op not in ("<=", "==", "!="):
            raise FormatError(f"{what}: unknown comparison {op!r}")
        return L._rel(op, d(lhs))
    if k in ("and", "or"):
        return (L.and_ if k == "and" else L.or_)(*(d(a) for a in v))
    raise FormatError(f"{what}: unknown expression node {k!r}")


# -- values ----------------------------------------------------------------------------------


def enc_value(x):
    t = type(x)
    if x is None or t is bool or t is int or t is str:
        return x
    if t is float:
        return x if math.isfinite(x) else {"float": repr(x)}
    if t is Var:
        return {"var": x.name}
    if t is tuple or t is list:
        return {t.__name__: [enc_value(y) for y in x]}
    if t is slice:
        return {"slice": [enc_value(x.start), enc_value(x.stop), enc_value(x.step)]}
    if t is dict:
        if not all(type(k) in (str, int) for k in x):
            raise SaveError(f"cannot save a dict with keys {list(x)!r}")
        return {"dict": [[k, enc_value(v)] for k, v in x.items()]}
    if x is Ellipsis:
        return {"ellipsis": True}
    if t is complex:
        return {"complex": [x.real, x.imag]}
    if isinstance(x, torch.dtype):
        return {"dtype": _key(DTYPES, x, "dtype")}
    if isinstance(x, torch.device):
        return {"device": str(x)}
    if isinstance(x, torch.memory_format):
        return {"memory_format": _key(MEMORY_FORMATS, x, "memory format")}
    if isinstance(x, torch.layout):
        return {"layout": _key(LAYOUTS, x, "layout")}
    raise SaveError(f"cannot save a {t.__name__} value in a trace: {x!r:.80}")


def _key(table: dict, x, what: str) -> str:
    for k, v in table.items():
        if v == x:
            return k
    raise SaveError(f"cannot save the {what} {x}")


def dec_value(j, var, what: str):
    """Decode a value; ``var(name)`` resolves an SSA name."""
    if j is None or type(j) in (bool, int, str):
        return j
    if type(j) is float:
        return j
    if not isinstance(j, dict) or len(j) != 1:
        raise FormatError(f"{what}: expected a value, found {j!r:.80}")
    ((k, v),) = j.items()
    d = lambda x: dec_value(x, var, what)  # noqa: E731
    if k == "var":
        return var(check_name(v, what))
    if k == "tuple" and isinstance(v, list):
        return tuple(d(x) for x in v)
    if k == "list" and isinstance(v, list):
        return [d(x) for x in v]
    if k == "slice" and isinstance(v, list) and len(v) == 3:
        return slice(*(d(x) for x in v))
    if k == "dict" and isinstance(v, list):
        out = {}
        for key, x in v:
            if type(key) not in (str, int):
                raise FormatError(f"{what}: a dict key must be str or int, found {key!r}")
            out[key] = d(x)
        return out
    if k == "ellipsis":
        return Ellipsis
    if k == "float" and v in ("inf", "-inf", "nan"):
        return float(v)
    if k == "complex" and isinstance(v, list) and all(type(p) in (int, float) for p in v):
        return complex(*v)
    tables = {"dtype": DTYPES, "memory_format": MEMORY_FORMATS, "layout": LAYOUTS}
    if k in tables:
        if v not in tables[k]:
            raise FormatError(f"{what}: unknown {k} {v!r}")
        return tables[k][v]
    if k == "device":
        return dec_device(v, what)
    raise FormatError(f"{what}: unknown value tag {k!r}")


def dec_device(v, what: str) -> torch.device:
    try:
        return torch.device(check_text(v, what))
    except RuntimeError as e:
        raise FormatError(f"{what}: not a device: {v!r} ({e})") from None


# -- metadata, locations ----------------------------------------------------------------------


def enc_meta(m):
    if m is None:
        return None
    if isinstance(m, TensorMeta):
        out = {
            "shape": [enc_expr(d) for d in m.shape],
            "dtype": _key(DTYPES, m.dtype, "dtype"),
            "device": str(m.device),
            "requires_grad": m.requires_grad,
            "strides": None if m.strides is None else [enc_expr(d) for d in m.strides],
        }
        for f in dataclasses.fields(m):  # fields added later: plain flags
            v = getattr(m, f.name)
            if f.name not in out and (v is None or type(v) in (bool, int, str)):
                out[f.name] = v
        return {"tensor": out}
    if isinstance(m, (E.Expr, int)) and not isinstance(m, bool):
        return {"expr": enc_expr(m)}
    if isinstance(m, str):
        return {"str": m}
    raise SaveError(f"cannot save variable metadata {m!r:.80}")


def dec_meta(j, what: str):
    if j is None:
        return None
    if not isinstance(j, dict) or len(j) != 1:
        raise FormatError(f"{what}: malformed metadata {j!r:.80}")
    ((k, v),) = j.items()
    if k == "expr":
        return dec_expr(v, what)
    if k == "str":
        return check_text(v, what)
    if k != "tensor" or not isinstance(v, dict):
        raise FormatError(f"{what}: unknown metadata {k!r}")
    if v.get("dtype") not in DTYPES:
        raise FormatError(f"{what}: unknown dtype {v.get('dtype')!r}")
    strides = v.get("strides")
    fields = {
        "shape": tuple(dec_expr(d, what) for d in v["shape"]),
        "dtype": DTYPES[v["dtype"]],
        "device": dec_device(v["device"], what),
        "requires_grad": bool(v["requires_grad"]),
        "strides": None if strides is None else tuple(dec_expr(d, what) for d in strides),
    }
    known = {f.name for f in dataclasses.fields(TensorMeta)}
    for name, x in v.items():
        if name not in fields and name in known and (x is None or type(x) in (bool, int, str)):
            fields[name] = x
    return TensorMeta(**fields)


def enc_where(w):
    if w is None or not isinstance(w, Location):
        return None
    return [w.filename, w.lineno, w.function]


def dec_where(j, what: str):
    if j is None:
        return None
    if not isinstance(j, list) or len(j) != 3:
        raise FormatError(f"{what}: malformed source location {j!r:.80}")
    f, line, fn = j
    return Location(check_text(f, what), check_int(line, what), check_text(fn, what))


def enc_error(t) -> str | None:
    """The nearest type of ``ERRORS`` that ``t`` is (``torch.linalg.LinAlgError``:
    ``RuntimeError``); None when none is."""
    return next(
        (c.__name__ for c in getattr(t, "__mro__", ()) if ERRORS.get(c.__name__) is c), None
    )


def dec_error(j, what: str):
    if j is None:
        return None
    if j not in ERRORS:
        raise FormatError(f"{what}: unknown exception type {j!r:.80} for a runtime assert")
    return ERRORS[j]


# -- traces ------------------------------------------------------------------------------------


def enc_trace(t: Trace) -> dict:
    from symshape.ops import BY_NAME

    refs = _refs()
    nodes = []
    for n in t.nodes:
        out = {
            "outputs": [{"name": v.name, "meta": enc_meta(v.meta)} for v in n.outputs],
            "where": enc_where(n.where),
        }
        if n.op is SYM:
            expr, pairs = n.args
            out |= {"op": "sym", "expr": enc_expr(expr), "pairs": _enc_pairs(pairs)}
        elif n.op is ASSERT:
            cond, index, pairs = n.args
            out |= {"op": "assert", "cond": enc_expr(cond), "index": index}
            out["pairs"] = _enc_pairs(pairs)
        elif n.op is CONST:
            out |= {"op": "const", "value": enc_value(n.args[0])}
        else:
            op = n.op
            if BY_NAME.get(op.name) is op:
                out["op"] = op.name
            elif (op.name, getattr(op, "source", None)) in refs:
                out |= {"op": op.name, "ref": op.source}
            else:
                raise SaveError(f"cannot save the op {op!r}: it is not in the op registry")
            out["args"] = [enc_value(a) for a in n.args]
            out["kwargs"] = [[k, enc_value(v)] for k, v in n.kwargs]
        if n.unpack:
            out["unpack"] = True
        if n.extra.get("effect"):
            out["effect"] = True
        nodes.append(out)
    return {
        "name": t.name,
        "inputs": [{"name": v.name, "meta": enc_meta(v.meta)} for v in t.inputs],
        "constants": sorted(t.constants),
        "nodes": nodes,
        "output": enc_value(t.output),
        "asserts": [
            {
                "cond": enc_expr(a.cond),
                "where": enc_where(a.where),
                "msg": a.msg,
                "error": enc_error(a.error),
            }
            for a in t.asserts
        ],
        "doc": t.doc,
        "bounds": dict(t.bounds),
    }


def _enc_pairs(pairs) -> list:
    return [[s.name, v.name] for s, v in pairs]


def dec_trace(j: dict, constants: dict, what: str) -> Trace:
    """Rebuild a trace; ``constants`` maps the names it reads to their values."""
    import symshape.ops  # noqa: F401  (fills the registry)
    from symshape.ops import BY_NAME

    if not isinstance(j, dict):
        raise FormatError(f"{what}: expected an object")
    name = j.get("name")
    if name not in ("computation", "backward"):
        raise FormatError(f"{what}: unexpected trace name {name!r}")
    refs = _refs()
    names: dict[str, Var] = {}
    const_names = set(j.get("constants", []))
    if const_names != set(constants):
        raise FormatError(f"{what}: its constants {sorted(const_names)} are not the ones stored")
    for c in const_names:
        names[check_name(c, f"{what} constant")] = Var(c)

    def define(d, where: str) -> Var:
        n = check_name(d.get("name"), where)
        if n in names:
            raise FormatError(f"{where}: {n} is assigned twice")
        v = names[n] = Var(n, dec_meta(d.get("meta"), where))
        return v

    def var(n: str) -> Var:
        v = names.get(n)
        if v is None:
            raise FormatError(f"{what}: {n} is read before it is defined")
        return v

    inputs = [define(d, f"{what} input {i}") for i, d in enumerate(j["inputs"])]
    nodes = []
    for i, nj in enumerate(j["nodes"]):
        at = f"{what} node {i}"
        where = dec_where(nj.get("where"), at)
        op = nj.get("op")
        if op == "sym":
            pairs = _dec_pairs(nj["pairs"], var, at)
            args = (dec_expr(nj["expr"], at), pairs)
            outs = tuple(define(d, at) for d in nj["outputs"])
            nodes.append(Node(SYM, args, outputs=outs, where=where))
            continue
        if op == "assert":
            pairs = _dec_pairs(nj["pairs"], var, at)
            args = (dec_expr(nj["cond"], at), check_int(nj["index"], at), pairs)
            nodes.append(Node(ASSERT, args, where=where))
            continue
        if op == "const":
            value = dec_value(nj["value"], var, at)
            outs = tuple(define(d, at) for d in nj["outputs"])
            nodes.append(Node(CONST, (value,), outputs=outs, where=where))
            continue
        if "ref" in nj:
            fn = refs.get((op, nj["ref"]))
        else:
            fn = BY_NAME.get(op) if isinstance(op, str) else None
        if fn is None:
            raise FormatError(
                f"{at}: unknown op {op!r}; this file needs an op this version of symshape "
                "does not have"
            )
        args = tuple(dec_value(a, var, at) for a in nj.get("args", []))
        kwargs = tuple((_kwarg_name(k, at), dec_value(v, var, at)) for k, v in nj.get("kwargs", []))
        outs = tuple(define(d, at) for d in nj["outputs"])
        extra = {"effect": True} if nj.get("effect") else {}
        unpack = bool(nj.get("unpack", False))
        nodes.append(Node(fn, args, kwargs, outs, where, unpack=unpack, extra=extra))
    asserts = [
        RuntimeAssert(
            dec_expr(a["cond"], what),
            dec_where(a.get("where"), what),
            None if a.get("msg") is None else check_text(a["msg"], what),
            dec_error(a.get("error"), what),
        )
        for a in j.get("asserts", [])
    ]
    doc = j.get("doc", "")
    if not isinstance(doc, str) or not all(line.isprintable() for line in doc.split("\n")):
        raise FormatError(f"{what}: its doc is not printable text")
    t = Trace(name, inputs, nodes, dec_value(j["output"], var, what), asserts, dict(constants), doc)
    bounds = j.get("bounds", {})  # absent in files written before bounds were printed
    if not isinstance(bounds, dict) or not all(
        isinstance(k, str) and type(v) is int for k, v in bounds.items()
    ):
        raise FormatError(f"{what}: bounds must map symbol names to ints")
    t.bounds = dict(bounds)
    try:
        t.lint()
    except AssertionError as e:
        raise FormatError(f"{what}: not a valid trace: {e}") from None
    return t


def _kwarg_name(k, what: str) -> str:
    if not isinstance(k, str) or not k.isidentifier() or keyword.iskeyword(k):
        raise FormatError(f"{what}: {k!r} is not a keyword argument name")
    return k


def _dec_pairs(j, var, what: str) -> tuple:
    return tuple((E.Symbol(check_name(s, what)), var(v)) for s, v in j)


__all__ = [
    "FormatError",
    "SaveError",
    "check_name",
    "check_text",
    "dec_expr",
    "dec_trace",
    "dec_value",
    "enc_expr",
    "enc_trace",
    "enc_value",
]
