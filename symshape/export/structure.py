"""The structure of a program's outputs (``symshape/jit/boundary/outputs.py`` specs) as JSON.

A computation returns flat values; the spec rebuilds the user's structure from
them. Every kind of spec has a JSON form::

    ["leaf"]                                       # the next flat output
    ["tuple" | "list", [specs]]
    ["dict", [keys], [specs]]
    ["pytree", serialized_type_name, context, [specs]]   # e.g. transformers' ModelOutput
    ["pytree", {"module": m, "qualname": q}, context, [specs]]  # a node with no serialized name
    ["tuple_subclass", {"module": m, "qualname": q}, [specs]]   # namedtuple, structseq
    ["object", {"module": m, "qualname": q}, [[attribute, spec], ...]]  # e.g. DynamicCache
    ["call", "slice" | "range", [specs]]           # a slice or range of this call's sizes
    ["const", value]                               # a value returned as it was traced
    ["class", {"module": m, "qualname": q}]        # a class returned as a value

A plain Python object (a KV cache, a user dataclass) is saved as its class's
import path and its attributes' specs, and rebuilt on load as in memory: an
instance made without calling ``__init__``, its attributes set one by one. A
class is saved only if its path names it (``module.qualname`` resolves to the
class itself); classes defined inside a function are refused with the fix.

Loading finds a class among the modules this process has imported; a
submodule of a package already imported (``transformers.cache_utils`` once
``transformers`` is) is imported as an attribute access of that package would.
A file never makes symshape import a package the process has not imported.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import keyword
import sys
import types

import torch
import torch.utils._pytree as pytree

from symshape.export.serialize import FormatError, SaveError, check_text, dec_value, enc_value

_CALLS = {"slice": slice, "range": range}
_TRACED = (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement
_MAX_DEPTH = 64


# -- classes by name -----------------------------------------------------------------------------


def class_ref(cls: type, what: str = "outputs") -> dict:
    """``{"module", "qualname"}`` naming ``cls``; SaveError unless they name it."""
    module, qualname = getattr(cls, "__module__", None), getattr(cls, "__qualname__", None)
    name = getattr(cls, "__name__", repr(cls))
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        raise SaveError(
            f"cannot save {what} of type {name}: expected a class importable by its name "
            f"(module.qualname), found one defined inside a function ({module}.{qualname}). "
            f"Fix: define {name} at module level, or return its tensors in a tuple or dict"
        )
    found = _lookup(sys.modules.get(module), qualname)
    if found is not cls:
        raise SaveError(
            f"cannot save {what} of type {name}: expected {module}.{qualname} to name the "
            "class, found "
            + ("nothing there" if found is None else f"another object ({type(found).__name__})")
            + f" (the class was redefined, or its module replaced). Fix: define {name} once, "
            "at module level, or return its tensors in a tuple or dict"
        )
    return {"module": module, "qualname": qualname}


def _lookup(obj, qualname: str):
    for part in qualname.split("."):
        if obj is None:
            return None
        obj = getattr(obj, part, None)
    return obj


def _dotted(path, allow_main: bool = False) -> bool:
    if not isinstance(path, str) or not path.isascii() or not path:
        return False
    if allow_main and path == "__main__":
        return True
    return all(
        p.isidentifier() and not keyword.iskeyword(p) and not p.startswith("__")
        for p in path.split(".")
    )


def find_class(ref, what: str) -> type:
    """The class ``ref`` names, among the modules this process imported (or a
    submodule of an imported package). FormatError otherwise."""
    if not isinstance(ref, dict) or set(ref) != {"module", "qualname"}:
        raise FormatError(
            f"{what}: expected a class as {{'module', 'qualname'}}, found {ref!r:.80}"
        )
    module, qualname = ref["module"], ref["qualname"]
    if not _dotted(module, allow_main=True) or not _dotted(qualname):
        raise FormatError(f"{what}: {module!r}, {qualname!r} is not a module and class name")
    mod = sys.modules.get(module)
    if mod is None:
        top = module.partition(".")[0]
        if top not in sys.modules:
            raise FormatError(
                f"{what}: expected the module {module} (which defines the output class "
                f"{qualname}) to be imported, found that this process has not imported "
                f"{top}; symshape.load imports no package a file names. Fix: import {top} "
                "before symshape.load"
            )
        try:
            mod = importlib.import_module(module)
        except ImportError as e:
            raise FormatError(
                f"{what}: expected the module {module} (which defines the output class "
                f"{qualname}), found that the installed {top} has none ({e}); was the file "
                f"written with another version of {top}?"
            ) from None
    cls = _lookup(mod, qualname)
    if cls is None:
        raise FormatError(
            f"{what}: expected the class {qualname} in {module}, found none; was the file "
            "written with another version of that library?"
        )
    if not isinstance(cls, type) or cls.__module__ != module or cls.__qualname__ != qualname:
        raise FormatError(f"{what}: {module}.{qualname} is not a class defined there")
    return cls


# -- saving -----------------------------------------------------------------------------------


def enc_spec(spec):
    """The JSON form of an output spec (None: the computation returns the structure)."""
    return None if spec is None else _enc(spec, 0)


def _enc(spec, depth: int):
    if depth > _MAX_DEPTH:
        raise SaveError(f"cannot save outputs nested more than {_MAX_DEPTH} levels deep")
    kind = spec[0]
    sub = lambda s: _enc(s, depth + 1)  # noqa: E731
    if kind == "leaf":
        return ["leaf"]
    if kind is tuple or kind is list:
        return [kind.__name__, [sub(c) for c in spec[1]]]
    if kind is dict:
        return ["dict", [enc_value(k) for k in spec[1]], [sub(c) for c in spec[2]]]
    if kind == "pytree":
        ser = pytree.SUPPORTED_SERIALIZED_TYPES.get(spec[1])
        name = ser.serialized_type_name if ser is not None else None
        if name is None:
            name = class_ref(spec[1])
        return ["pytree", name, enc_value(spec[2]), [sub(c) for c in spec[3]]]
    if kind == "tuple_subclass":
        return ["tuple_subclass", class_ref(spec[1]), [sub(c) for c in spec[2]]]
    if kind == "object":
        return ["object", class_ref(spec[1]), [[_attr(k, spec[1]), sub(c)] for k, c in spec[2]]]
    if kind == "call":
        name = next((k for k, f in _CALLS.items() if f is spec[1]), None)
        if name is None:
            raise SaveError(f"cannot save outputs built by {spec[1]!r}: only slices and ranges")
        return ["call", name, [sub(c) for c in spec[2]]]
    if kind == "const":
        return _enc_const(spec[1], depth)
    raise SaveError(
        f"cannot save outputs of kind {kind!r}: expected tensors, Python scalars, tuples, lists, "
        "dicts, pytree nodes (transformers' ModelOutput) or objects of importable classes "
        "holding them. Fix: return the values in one of those"
    )


def _attr(name, cls) -> str:
    if not isinstance(name, str) or not name.isprintable() or not name:
        raise SaveError(f"cannot save a {cls.__name__} output: its attribute {name!r} is no name")
    return name


def _enc_const(v, depth: int):
    """A value the trace returns as it was (it holds no traced value)."""
    if depth > _MAX_DEPTH:
        raise SaveError(f"cannot save a constant output nested more than {_MAX_DEPTH} levels deep")
    try:
        return ["const", enc_value(v)]
    except SaveError:
        pass
    t = type(v)
    if isinstance(v, _TRACED):  # inside an object outputs.flatten did not look into
        raise SaveError(
            f"cannot save outputs: expected every traced value of the output among its leaves, "
            f"found a traced {t.__name__} inside a value kept as a constant (an attribute the "
            "output's flattening does not read, such as a __slots__ one). Fix: return it in a "
            "tuple, dict or an object without __slots__"
        )
    if isinstance(v, torch.nn.Module):
        raise SaveError(
            f"cannot save the output {t.__name__}: expected values the program computes, "
            "found a module the traced code returned as it was. Fix: return it outside the "
            "exported function"
        )
    if isinstance(v, type):
        return ["class", class_ref(v, "a class returned")]
    if t in (tuple, list):
        return [t.__name__, [_enc_const(x, depth + 1) for x in v]]
    if t is dict and all(type(k) in (str, int) for k in v):
        return ["dict", list(v), [_enc_const(x, depth + 1) for x in v.values()]]
    if _is_plain(v):
        return [
            "object",
            class_ref(t),
            [[_attr(k, t), _enc_const(x, depth + 1)] for k, x in _attributes(v)],
        ]
    raise SaveError(
        f"cannot save the constant output {v!r:.60} (a {t.__name__}): expected tensors, Python "
        "scalars, dtypes, devices, classes, or containers and objects of importable classes "
        "holding them. Fix: return it outside the exported function"
    )


def _is_plain(v) -> bool:
    t = type(v)
    if isinstance(v, type) or not (t.__flags__ & _HEAPTYPE):
        return False
    return hasattr(v, "__dict__") or bool(_slots(t))


def _slots(t: type) -> list:
    out = []
    for k in t.__mro__:
        s = k.__dict__.get("__slots__", ())
        out.extend(
            n for n in ((s,) if isinstance(s, str) else s) if n not in ("__dict__", "__weakref__")
        )
    return out


def _attributes(x) -> list:
    """An object's state, as ``outputs.flatten`` reads it: its slots, then ``__dict__``."""
    out = [(n, getattr(x, n)) for n in _slots(type(x)) if hasattr(x, n)]
    d = getattr(x, "__dict__", None)
    if d is not None:
        out.extend(d.items())
    return out


# -- loading -----------------------------------------------------------------------------------


def _no_vars(name):
    raise FormatError(f"outputs: the output structure names a variable {name!r}")


def dec_spec(j):
    """Rebuild an output spec written by ``enc_spec``."""
    return None if j is None else _dec(j, "outputs", 0)


def _dec(j, what: str, depth: int):
    if depth > _MAX_DEPTH:
        raise FormatError(f"{what}: nested more than {_MAX_DEPTH} levels deep")
    if not isinstance(j, list) or not j:
        raise FormatError(f"{what}: expected a structure, found {j!r:.80}")
    kind = j[0]
    sub = lambda s: _dec(s, what, depth + 1)  # noqa: E731
    if kind == "leaf":
        return ("leaf",)
    if kind in ("tuple", "list"):
        return ({"tuple": tuple, "list": list}[kind], [sub(c) for c in _list(j[1], what)])
    if kind == "dict":
        keys = [dec_value(k, _no_vars, what) for k in _list(j[1], what)]
        if not all(type(k) in (str, int) for k in keys):
            raise FormatError(f"{what}: dict keys must be str or int, found {keys!r:.80}")
        return (dict, keys, [sub(c) for c in _list(j[2], what)])
    if kind == "pytree":
        t = _pytree_type(j[1], what)
        return ("pytree", t, dec_value(j[2], _no_vars, what), [sub(c) for c in _list(j[3], what)])
    if kind == "tuple_subclass":
        cls = find_class(j[1], what)
        if not issubclass(cls, tuple) or not (hasattr(cls, "_fields") or hasattr(cls, "n_fields")):
            raise FormatError(f"{what}: {cls.__qualname__} is not a namedtuple or structseq")
        return ("tuple_subclass", cls, [sub(c) for c in _list(j[2], what)])
    if kind == "object":
        cls = _object_class(j[1], what)
        attrs = []
        for item in _list(j[2], what):
            if not isinstance(item, list) or len(item) != 2:
                raise FormatError(f"{what}: expected [attribute, structure], found {item!r:.80}")
            attrs.append((_dec_attr(item[0], cls, what), sub(item[1])))
        return ("object", cls, attrs)
    if kind == "call":
        if j[1] not in _CALLS:
            raise FormatError(f"{what}: unknown call {j[1]!r}; expected 'slice' or 'range'")
        return ("call", _CALLS[j[1]], [sub(c) for c in _list(j[2], what)])
    if kind == "const":
        return ("const", dec_value(j[1], _no_vars, what))
    if kind == "class":
        return ("const", find_class(j[1], what))
    raise FormatError(f"{what}: unknown structure {kind!r}")


def _list(j, what: str) -> list:
    if not isinstance(j, list):
        raise FormatError(f"{what}: expected a list, found {j!r:.80}")
    return j


def _pytree_type(name, what: str) -> type:
    if isinstance(name, dict):
        t = find_class(name, what)
        if t not in pytree.SUPPORTED_NODES:
            raise FormatError(
                f"{what}: expected {t.__qualname__} registered as a pytree node, found it is "
                "not in this process. Fix: import the code that registers it before symshape.load"
            )
        return t
    t = pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(name) if isinstance(name, str) else None
    if t is None and isinstance(name, str) and "." in name:  # its module not imported yet
        module, _, qualname = name.rpartition(".")
        with contextlib.suppress(FormatError):
            find_class({"module": module, "qualname": qualname}, what)
        t = pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(name)
    if t is None or t not in pytree.SUPPORTED_NODES:
        top = name.partition(".")[0] if isinstance(name, str) else "the library that defines it"
        raise FormatError(
            f"{what}: expected the output type {name!r} registered as a pytree node, found it "
            f"is not in this process (symshape.load imports no package a file names). Fix: "
            f"import {top} before symshape.load"
        )
    return t


def _object_class(ref, what: str) -> type:
    cls = find_class(ref, what)
    if not cls.__flags__ & _HEAPTYPE:
        raise FormatError(f"{what}: {cls.__qualname__} is not a Python class")
    try:
        object.__new__(cls)  # what rebuilding does on each call: no __init__ runs
    except TypeError as e:
        raise FormatError(f"{what}: {cls.__qualname__} cannot be rebuilt ({e})") from None
    return cls


def _dec_attr(name, cls: type, what: str) -> str:
    check_text(name, what)
    if not name:
        raise FormatError(f"{what}: an empty attribute name")
    d = inspect.getattr_static(cls, name, None)
    if hasattr(type(d), "__set__") and not isinstance(d, types.MemberDescriptorType):
        raise FormatError(  # a property: setting it would run the class's code
            f"{what}: {cls.__qualname__}.{name} is a {type(d).__name__}, not an attribute a "
            "saved program sets"
        )
    return name


__all__ = ["class_ref", "dec_spec", "enc_spec", "find_class"]
