"""Flattening what a traced function returns, and rebuilding it on every call.

A computation returns flat values; a *spec* says how to put them back into
the user's structure: tuples, lists, dicts, namedtuples and structseqs,
torch.utils._pytree nodes (e.g. transformers' ModelOutput), and plain Python
objects that hold traced values (e.g. a KV cache), which are rebuilt
attribute by attribute. Parts that hold no traced value are kept as they
were returned (constants of the trace).
"""

from __future__ import annotations

import collections
import collections.abc
import functools
import inspect
import itertools
import types
import weakref

import torch
import torch.utils._pytree as pytree

from symshape.jit.guards.hidden_state import lazy_iterator
from symshape.jit.guards.state import python_class, user_class, viewed
from symshape.trace.errors import RunsEagerly
from symshape.trace.generator import DefaultGeneratorProxy, GeneratorProxy
from symshape.trace.numpy_arrays import is_array, to_numpy
from symshape.trace.proxy import TensorProxy, own_attributes
from symshape.trace.subclasses import pytype
from symshape.trace.symvalues import plain

_TRACED = (TensorProxy, GeneratorProxy, torch.SymInt, torch.SymFloat, torch.SymBool)
_SCALARS = (type(None), bool, int, float, str, torch.dtype, torch.device)


# the views of a mapping: what builds each from the mapping (None: a mappingproxy)
_VIEWS = {types.MappingProxyType: None} | {
    type(getattr(d, k)()): k
    for d in ({}, collections.OrderedDict())
    for k in ("keys", "values", "items")
}


def _view(kind: str | None, mapping):
    return types.MappingProxyType(mapping) if kind is None else getattr(mapping, kind)()


def holds_traced(x, depth: int = 0, seen: set | None = None) -> bool:
    """Does ``x`` hold a traced value, ``depth`` levels down at most? Each object
    is looked into once; Python modules and classes are not looked into (what
    a module's globals hold is guarded and replayed by jit/guards/globals_guard)."""
    if isinstance(x, _TRACED):
        return True
    if depth > 8:
        return False
    seen = set() if seen is None else seen
    if id(x) in seen:
        return False
    seen.add(id(x))
    if isinstance(x, (tuple, list)):
        return any(holds_traced(y, depth + 1, seen) for y in x)
    if type(x) in _VIEWS:
        return holds_traced(viewed(x), depth + 1, seen)
    if isinstance(x, dict):
        return any(holds_traced(y, depth + 1, seen) for y in x.values())
    if type(x) is types.FunctionType and x.__closure__:  # a closure a closure calls
        return any(holds_traced(_cell(c), depth + 1, seen) for c in x.__closure__)
    if isinstance(x, (type, types.ModuleType)) or not (
        hasattr(x, "__dict__") or hasattr(type(x), "__slots__")
    ):
        return False
    return any(holds_traced(y, depth + 1, seen) for _, y in _attributes(x))


def flatten(
    x, is_leaf=None, refs=None, fresh=False, cells: frozenset = frozenset(), existing=None
) -> tuple[list, tuple]:
    """``(leaves, spec)``: leaves are traced values and plain scalars (and
    whatever ``is_leaf`` accepts). ``refs`` maps ``id(obj)`` to an index for
    objects the caller passed in: they come back as the caller's own objects
    (``("ref", i)``), never copies. With ``fresh`` (True, or a test of a plain
    object), plain objects are rebuilt on every call even when they hold no
    traced value (a new cache layer stored into a caller's object, an object
    the call made, must not be shared between calls). ``fresh`` may be a list, one
    for each part of the tuple ``x`` (a result and the values a call stored): an
    object met in two parts is still built once. ``existing(obj)``: was ``obj``
    there before the call (an argument's, a global's)? Then, holding no traced
    value, it is the caller's object, returned or stored as itself."""
    tests = [
        f if callable(f) else (lambda _, f=f: f)
        for f in (fresh if type(fresh) is list else [fresh])
    ]
    part = [tests[0]]  # the test of the part walked now

    def rebuilt(obj) -> bool:
        return part[0](obj)

    leaves: list = []
    tagged: set = set()  # ids of the tensors whose attributes are walked

    def walk(x):
        t = type(x)
        if refs is not None and id(x) in refs:
            return ("ref", refs[id(x)])
        spec = _special(x, t, walk)
        if spec is None and t is TensorProxy:
            spec = _tensor_spec(x, walk, leaves, tagged)
        if spec is not None:
            return spec
        if (
            isinstance(x, _TRACED)
            or t in _SCALARS
            or t is torch.Size
            or isinstance(x, torch.Tensor)
            or (is_leaf is not None and is_leaf(x))
        ):
            leaves.append(x)
            return ("leaf",)
        if existing is not None and t not in _SCALARS and existing(x) and not holds_traced(x):
            return ("const", x)  # `o.attr = DEFAULTS`: eager stores that very tuple
        if t is tuple or t is list:
            return (t, [walk(y) for y in x])
        spec = _function_spec(x, t, walk, tagged, cells, existing)
        if spec is not None:
            return spec
        return _structure(x, t, walk, rebuilt)

    def walk(x, _walk=walk):  # an object found twice is built once (``_shared``)
        if id(x) in built:
            shared.add(id(x))
            return ("same", id(x))
        spec = _walk(x)
        if spec[0] not in _UNSHARED:
            built[id(x)] = spec
        return spec

    built: dict = {}  # id(x) -> its spec, for what one object may be met twice as
    shared: set = set()
    if type(fresh) is list:
        specs = []
        for part[0], y in zip(tests, x, strict=True):
            specs.append(walk(y))
        spec = (tuple, specs)
    else:
        spec = walk(x)
    walk = None  # a recursive closure is a cycle that would hold ``leaves``
    if shared:
        spec = _shared(spec, {id(built[k]): k for k in shared})
    return leaves, spec


def _function_spec(x, t: type, walk, tagged: set, cells, existing) -> tuple | None:
    """The spec of a function, ``functools.partial`` or bound method the call returns
    or stores that is made anew on every call (``flatten``'s ``walk`` for its parts);
    None for any other value."""
    if t is types.FunctionType and id(x) not in tagged and _made_anew(x, existing):
        # a closure the function returns (`def inner(): return x * 3`, a counter it
        # keeps in a cell): made again on every call around that call's values, as
        # eager's closes over its own; its defaults too (`lambda z, k=x * 2: z + k`)
        tagged.add(id(x))
        # a cell that was there before the call (the function's own closure's:
        # `nonlocal out` of an enclosing scope) is shared, as eager shares it
        spec = ("closure", x, [("cell", c) if id(c) in cells else walk(_cell(c))
                               for c in x.__closure__ or ()])  # fmt: skip
        return spec + ([walk(d) for d in x.__defaults__],) if x.__defaults__ else spec
    if t is functools.partial and (  # one the call made, or holding its values: anew
        (existing is not None and not existing(x)) or holds_traced([x.args, x.keywords])
    ):
        func = walk(x.func)  # walked in the order the parts are built
        values = [*map(walk, x.args), *map(walk, x.keywords.values())]
        return ("call", _partial, [func, ("const", list(x.keywords)), *values])
    if t is types.MethodType and not isinstance(x.__self__, type):  # `return c.f`: bound
        return ("call", types.MethodType, [walk(x.__func__), walk(x.__self__)])  # to this c
    return None


def _special(x, t: type, walk) -> tuple | None:
    """The spec of a value made anew from what the call left: a traced NumPy array,
    an iterator, the global generator, a mapping's view, a slice or range of sizes."""
    if is_array(x):  # a traced NumPy array: an np.ndarray of its tensor, after the call
        return ("call", to_numpy, [walk(x.tensor)])
    if lazy_iterator(x):
        return _lazy(x, t, walk)
    if t is DefaultGeneratorProxy:  # what the code named is the real global generator
        return ("const", torch._C.default_generator)
    if t in _VIEWS:  # a mappingproxy, keys(), values(), items(): of this call's mapping
        return ("call", _view, [("const", _VIEWS[t]), walk(viewed(x))])
    if t is slice or t is range:  # their ints may be sizes: this call's, not the traced one's
        if not any(isinstance(v, _TRACED) for v in (x.start, x.stop, x.step)):
            return ("const", x)
        return ("call", t, [walk(x.start), walk(x.stop), walk(x.step)])
    return None


def _tensor_spec(x, walk, leaves: list, tagged: set) -> tuple | None:
    """The spec of a traced tensor that is more than a leaf: a Parameter, a tensor
    subclass, a tensor with attributes the code set; None for a plain one."""
    if getattr(x, "_is_param", False):
        leaves.append(x)  # nn.Parameter(t) made in the trace: a Parameter, as in eager
        return ("param",)
    if id(x) not in tagged and pytype(x) is not None:
        # a tensor subclass (trace/subclasses.py): the class, then its attributes
        tagged.add(id(x))
        leaves.append(x)
        return ("subclass", pytype(x), [(k, walk(v)) for k, v in _tags(x)])
    if id(x) not in tagged and _tags(x):
        # `y.tag = "a"; return y`: the attributes the code set on a tensor it returns
        tagged.add(id(x))
        leaves.append(x)
        return ("tagged", [(k, walk(v)) for k, v in _tags(x)])
    return None


def _structure(x, t: type, walk, rebuilt) -> tuple:
    """The spec of a namedtuple, a dict, a set, a pytree node, a container subclass
    or a plain object (``flatten``'s ``walk`` for their parts)."""
    if isinstance(x, tuple) and (hasattr(x, "_fields") or hasattr(x, "n_fields")):
        spec = ("tuple_subclass", t, [walk(y) for y in x])  # namedtuple, structseq
        own = getattr(x, "__dict__", None)  # `tup.c = ...` on a subclass's instance
        return spec + ([(k, walk(v)) for k, v in own.items()],) if own else spec
    if t is dict and any(isinstance(k, TensorProxy) for k in x):  # keyed by tensors
        return ("keyed", [walk(k) for k in x], [walk(v) for v in x.values()])  # (a param)
    if t is dict:  # keys made from sizes are this call's ints (hashing them guarded them)
        return (dict, [_concrete(k) for k in x], [walk(v) for v in x.values()])
    if t in (set, frozenset) and any(isinstance(v, _SYMBOLIC) for v in x):
        return ("const", t(_concrete(v) for v in x))
    node = pytree.SUPPORTED_NODES.get(t)
    if node is not None and rebuilt(x) and _constant_class(t):
        node = None  # its node's context is the object itself: made anew, as eager's
    if node is not None and not _apart(x):
        children, context = node.flatten_fn(x)
        return ("pytree", t, context, [walk(c) for c in children])
    if t is object and rebuilt(x):  # a sentinel the call made: a new one each call
        return ("call", object, [])
    if t is weakref.ref and isinstance(x(), _TRACED):  # `weakref.ref(t, cb)` of a traced
        callback = [] if x.__callback__ is None else [("const", x.__callback__)]
        return ("call", weakref.ref, [walk(x()), *callback])  # value: to this call's value
    if isinstance(x, BaseException) and (rebuilt(x) or holds_traced(x)):
        return _exception(x, t, walk)
    if not (_rebuildable(x) and rebuilt(x)) and not holds_traced(x):
        _no_traced_properties(x, t)
        return ("const", x)
    # walked in the order _build makes them: items, then attributes
    if isinstance(x, (list, tuple, set, frozenset)):  # a list, tuple or set subclass
        items = [walk(v) for v in x]
        return ("sequence", t, items, [(k, walk(v)) for k, v in _attributes(x)])
    if isinstance(x, dict):  # a dict subclass (an OrderedDict's, ModelOutput's pattern)
        items = [walk(v) for v in x.values()]
        attributes = [(k, walk(v)) for k, v in _attributes(x)]
        return ("mapping", t, list(x), items, attributes, getattr(x, "default_factory", None))
    return ("object", t, [(k, walk(v)) for k, v in _attributes(x)])


_CHAINED = ("__cause__", "__context__", "__suppress_context__")


def _exception(x: BaseException, t: type, walk) -> tuple:
    """An exception the call made (``return ValueError(n)``, one it caught): a new one
    each call, as eager's, with its ``args``, attributes (``__notes__`` among them)
    and chained exceptions. Its traceback, of the traced call's frames, is not kept."""
    # what it is made from, as pickle makes it (OSError's has its filename besides args)
    reduced = x.__reduce__()
    args = [walk(a) for a in reduced[1]]  # in the order _made_exception builds them
    attributes = [(k, walk(v)) for k, v in _attributes(x)]
    return ("exception", t, args, attributes, [(k, walk(getattr(x, k))) for k in _CHAINED])


def _no_traced_properties(x, t: type) -> None:
    """An object of a C++ class (``SDPAParams``) holds its tensors where no walk sees
    them; one whose properties give traced tensors cannot be returned as it is (a
    later call would find the trace's placeholders in it): the call runs eagerly."""
    if t.__module__ == "builtins" or isinstance(x, (type, types.FunctionType, types.ModuleType)):
        return
    names = [n for n in dir(t) if isinstance(inspect.getattr_static(t, n, None), property)]
    for n in names[:32]:
        try:
            v = getattr(x, n)
        except Exception:  # a property that raises holds nothing to see
            continue
        if isinstance(v, _TRACED):
            raise RunsEagerly(
                f"the function returns (or stores) a {t.__module__}.{t.__qualname__} whose "
                f"`{n}` is a tensor it computed, which symshape cannot make again for later calls",
                "return the tensors, and build the object outside the jit-compiled function",
            )


def _constant_class(t: type) -> bool:
    """Registered with ``pytree.register_constant`` (torch 2.6 and later)?"""
    is_constant = getattr(pytree, "is_constant_class", None)
    return is_constant is not None and is_constant(t)


def _apart(x) -> bool:
    """Is ``x`` a dict subclass (a ModelOutput) whose items and attributes its
    constructor would not make again: a key set to None, an attribute that is not
    its item? It is then built as it is (``mapping``), not by its pytree node."""
    d = getattr(x, "__dict__", None) if isinstance(x, dict) else None
    if not d:
        return False
    if any(v is None for v in dict.values(x)):  # (past the subclass's own methods)
        return True
    return any(
        dict.__getitem__(x, k) is not v if dict.__contains__(x, k) else v is not None
        for k, v in d.items()
    )


_UNSHARED = ("leaf", "const", "ref", "param", "same")  # identity kept without a memo


# where a spec holds the specs of its parts: (index, True) for a list of specs,
# (index, False) for a list of (name, spec) pairs
_PARTS = {
    tuple: ((1, True),), list: ((1, True),), dict: ((2, True),), "call": ((2, True),),
    "closure": ((2, True), (3, True)), "pytree": ((3, True),), "tagged": ((1, False),),
    "object": ((2, False),), "tuple_subclass": ((2, True), (3, False)),
    "keyed": ((1, True), (2, True)),
    "mapping": ((3, True), (4, False)), "sequence": ((2, True), (3, False)),
    "lazy": ((2, True), (3, True)), "subclass": ((2, False),),
    "exception": ((2, True), (3, False), (4, False)),
}  # fmt: skip


def _shared(spec, first: dict):
    """``spec`` with each first occurrence of an object met again wrapped as
    ``("keep", key, spec)``: what it builds is kept for the ``("same", key)``s."""
    out = list(spec)
    for i, specs in _PARTS.get(spec[0], ()):
        if i < len(spec):
            out[i] = [_shared(c, first) if specs else (c[0], _shared(c[1], first)) for c in spec[i]]
    out = tuple(out)
    if id(spec) in first:
        return ("keep", first[id(spec)], out)
    return out


def reachable(roots, depth: int = 3, width: int = 1024) -> set:
    """The ids of the objects ``roots`` hold, ``depth`` levels down: in lists,
    tuples, dict values and plain objects' attributes (``width`` of each at most:
    what lies past it is taken as the call's, made anew)."""
    seen: set = set()
    level = list(roots)
    for _ in range(depth + 1):
        nxt = []
        for v in level:
            if id(v) in seen or isinstance(v, (*_SCALARS, torch.Tensor, type, types.ModuleType)):
                continue
            seen.add(id(v))
            if isinstance(v, (list, tuple)):  # past a subclass's own __iter__
                items = list.__iter__(v) if isinstance(v, list) else tuple.__iter__(v)
                nxt.extend(itertools.islice(items, width))
            elif isinstance(v, dict):
                nxt.extend(itertools.islice(dict.values(v), width))
            elif _rebuildable(v):
                nxt.extend(y for _, y in _attributes(v))
        level = nxt
    return seen


def existing_test(there: set, read: list):
    """A test of an object met in the result or in what the call stored: was it
    there before the call (``there``: the ids of what the arguments, the modules,
    the globals and closure variables the code read held, three levels down), or
    held by an object the code read off a module (``read``)?"""
    known: set | None = None

    def existing(x) -> bool:
        nonlocal known
        if id(x) in there:
            return True
        if known is None:
            known = reachable(read)
        return id(x) in known

    return existing


def made_by_the_call(existing):
    """A test of a plain object the function returns: did the call make it? An
    instance of one of the user's classes, of a library's class written in Python
    (``warnings.catch_warnings()``), an exception, or a bare ``object()``, that
    was not there before the call (``existing``) is taken as made by it, and made
    anew on every call as eager makes it (``return x + 1, Box()``); other objects
    come back as themselves."""

    def made(x) -> bool:
        t = type(x)
        ours = t is object or user_class(t) or python_class(t)
        if not ours and not isinstance(x, BaseException):  # an exception: of any class
            return False
        return not existing(x)

    return made


_EMPTY = object()  # an empty cell's content


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _concrete(k):
    """A size (or a tuple holding one) used as a dict key or a set member: the value
    it has in this call, with the guard that makes it so (a key outlives the trace;
    Python hashed it as that value)."""
    if type(k) is tuple and any(isinstance(v, _SYMBOLIC) for v in k):
        return tuple(_concrete(v) for v in k)
    return plain(k)


def _lazy(x, t, walk) -> tuple:
    """A lazy ``map``/``filter``/``zip``/``enumerate``/``reversed`` or a list's, tuple's
    or range's iterator the call returns: made again after every call from what it
    reduces to (its function, the iterators it reads, where they stand), so that it
    is lazy as eager's is: the caller's iteration runs the function."""
    reduced = x.__reduce__() if t.__module__ == "builtins" and t in _REDUCIBLE else None
    if reduced is None or type(reduced[1]) is not tuple:
        raise RunsEagerly(
            f"the function returns (or stores) a lazy {t.__module__}.{t.__qualname__}, "
            "whose items are computed when iterated, after the call: a trace can only "
            "return values it computed",
            "return a list (list(it)) or a tuple of the values",
        )
    state = [("const", reduced[2])] if len(reduced) > 2 else []  # an index, zip's strict
    return ("lazy", reduced[0], [walk(a) for a in reduced[1]], state)


_REDUCIBLE = frozenset(
    type(it)
    for it in (
        map(len, ()), filter(None, ()), zip(), enumerate(()), reversed([]), iter([]),
        iter(()), iter(range(0)), reversed(range(0)), reversed(()),
    )
)  # fmt: skip


def _cell(c):
    try:
        return c.cell_contents
    except ValueError:
        return _EMPTY


def _made_anew(fn, existing) -> bool:
    """Is a function the call returns or stores made again on every call: one the call
    made with cells of its own (`nonlocal n`), or one that holds traced values in its
    cells or defaults?"""
    return bool(
        (fn.__closure__ and existing is not None and not existing(fn))
        or any(holds_traced(_cell(c)) for c in fn.__closure__ or ())
        or (fn.__defaults__ and holds_traced(fn.__defaults__))
    )


def _partial(func, keys: list, *values):
    """``functools.partial`` made again from its parts (``keys``: its keywords')."""
    n = len(values) - len(keys)
    return functools.partial(func, *values[:n], **dict(zip(keys, values[n:])))


def _closure(s, it, objects, memo):
    fn = s[1]
    cells = []
    for c in s[2]:
        if c[0] == "cell":
            cells.append(c[1])
            continue
        v = _build(c, it, objects, memo)
        cells.append(types.CellType() if v is _EMPTY else types.CellType(v))
    defaults = tuple(_build(c, it, objects, memo) for c in s[3]) if len(s) > 3 else None
    new = types.FunctionType(
        fn.__code__, fn.__globals__, fn.__name__, defaults or fn.__defaults__, tuple(cells) or None
    )
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__dict__.update(fn.__dict__)
    return new


def _tags(p) -> list:
    """The attributes user code set on a traced tensor (not symshape's own)."""
    return own_attributes(p)


def _attributes(x) -> list:
    """An object's state: its ``__slots__`` (every class in the MRO) and ``__dict__``."""
    out = []
    for cls in type(x).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(x, name):
                out.append((name, getattr(x, name)))
    d = getattr(x, "__dict__", None)
    if d is not None:
        out.extend(d.items())
    return out


def _rebuildable(x) -> bool:
    """A plain Python object (its class written in Python, its state in attributes)."""
    from symshape.jit.guards.state import is_plain_object

    return is_plain_object(x) and not isinstance(x, type)


def unflatten(leaves, spec, objects=()):
    """Rebuild the structure; ``("ref", i)`` is ``objects[i]``."""
    return _build(spec, iter(leaves), objects, {})


def _parameter(v):
    """``nn.Parameter(t)`` made by the trace: a parameter passed in comes back as
    itself; a leaf the computation made (``detach().requires_grad_()``, what
    ``nn.Parameter`` does with a tensor it cannot subclass) becomes the Parameter,
    the same object, so the outputs computed from it reach it in the backward
    (``self.w = nn.Parameter(...)`` in a lazy module's first forward)."""
    if isinstance(v, torch.nn.Parameter):
        return v
    if type(v) is torch.Tensor and v.grad_fn is None:
        v.__class__ = torch.nn.Parameter
        return v
    return torch.nn.Parameter(v, v.requires_grad)


def _build(s, it, objects, memo):
    # a module-level function, not a recursive closure: a closure that calls itself
    # is a reference cycle, and its cell holding ``it`` would keep this call's
    # outputs (and what their autograd graph saves) alive until the next gc pass
    kind = s[0]
    if kind == "leaf":
        return next(it)
    if kind == "same":  # returned twice (`return L, L`): one object, as in eager
        return memo[s[1]]
    if kind == "keep":
        v = memo[s[1]] = _build(s[2], it, objects, memo)
        return v
    if kind == "param":
        return _parameter(next(it))
    if kind == "ref":
        return objects[s[1]]
    if kind == "closure":
        return _closure(s, it, objects, memo)
    if kind == "subclass":
        v = next(it)
        v = v if type(v) is s[1] else torch.Tensor.as_subclass(v, s[1])
        for k, c in s[2]:
            setattr(v, k, _build(c, it, objects, memo))
        return v
    if kind == "lazy":  # map(f, its), iter(list) at its index: made anew, as lazy
        obj = s[1](*[_build(c, it, objects, memo) for c in s[2]])
        for c in s[3]:
            obj.__setstate__(_build(c, it, objects, memo))
        return obj
    if kind == "tagged":
        v = next(it)
        for k, c in s[1]:
            setattr(v, k, _build(c, it, objects, memo))
        return v
    if kind == "call":
        return s[1](*[_build(c, it, objects, memo) for c in s[2]])
    if kind is tuple:
        return tuple(_build(c, it, objects, memo) for c in s[1])
    if kind is list:
        return [_build(c, it, objects, memo) for c in s[1]]
    if kind is dict:
        return {k: _build(c, it, objects, memo) for k, c in zip(s[1], s[2])}
    if kind == "keyed":  # keys are this call's tensors (a parameter: the caller's own)
        keys = [_build(c, it, objects, memo) for c in s[1]]
        return dict(zip(keys, [_build(c, it, objects, memo) for c in s[2]]))
    if kind == "tuple_subclass":
        items = [_build(c, it, objects, memo) for c in s[2]]
        out = s[1](*items) if hasattr(s[1], "_fields") else s[1](items)
        for k, c in s[3] if len(s) > 3 else ():
            _put(out, k, _build(c, it, objects, memo))
        return out
    if kind == "pytree":
        children = [_build(c, it, objects, memo) for c in s[3]]
        return pytree.SUPPORTED_NODES[s[1]].unflatten_fn(children, s[2])
    if kind == "const":
        return s[1]
    if kind == "mapping":
        return _mapping(s, it, objects, memo)
    if kind == "sequence":
        return _sequence(s, it, objects, memo)
    if kind == "exception":
        return _made_exception(s, it, objects, memo)
    obj = s[1].__new__(s[1])  # object.__new__, or a SimpleNamespace's own
    for k, c in s[2]:
        _put(obj, k, _build(c, it, objects, memo))
    return obj


def _put(obj, name: str, value) -> None:
    """Set an attribute of an object being rebuilt as unpickling sets it: its slot,
    or into its ``__dict__`` (past a read-only property of the same name)."""
    if type(getattr(type(obj), name, None)) is types.MemberDescriptorType:
        object.__setattr__(obj, name, value)
    else:
        object.__getattribute__(obj, "__dict__")[name] = value


def _sequence(s, it, objects, memo):
    """A list, tuple or set subclass, made as unpickling makes one: no ``__init__``,
    its items through the built-in base, then its attributes. The base's ``__new__``
    makes it: the class's own may want arguments, and its work is in the attributes."""
    cls, items, attributes = s[1:]
    values = [_build(c, it, objects, memo) for c in items]
    if issubclass(cls, (tuple, frozenset)):
        obj = (tuple if issubclass(cls, tuple) else frozenset).__new__(cls, values)
    else:
        obj = (list if issubclass(cls, list) else set).__new__(cls)
        (list.extend if isinstance(obj, list) else set.update)(obj, values)
    for k, c in attributes:
        _put(obj, k, _build(c, it, objects, memo))
    return obj


def _made_exception(s, it, objects, memo):
    """An exception made as the call made its own: ``__new__`` and the built-in base's
    ``__init__`` take what it reduces to, its ``args`` (``StopIteration.value``,
    ``OSError.errno`` come from them; a Python class's ``__init__``, whose parameters are its own, is not called),
    then its attributes and chained exceptions are set."""
    cls, args, attributes, chain = s[1:]
    values = tuple(_build(c, it, objects, memo) for c in args)
    obj = cls.__new__(cls, *values)
    next(b for b in cls.__mro__ if b.__module__ == "builtins").__init__(obj, *values)
    for k, c in attributes:
        _put(obj, k, _build(c, it, objects, memo))
    for k, c in chain:
        setattr(obj, k, _build(c, it, objects, memo))
    return obj


def _mapping(s, it, objects, memo):
    """A dict subclass made as unpickling makes one: ``cls.__new__``, then its items
    through the built-in base's ``__new__`` and ``__setitem__`` (not the class's own),
    then its attributes, no ``__init__``."""
    cls, keys, items, attributes, factory = s[1:]
    base = next(b for b in cls.__mro__ if b.__module__ in ("builtins", "collections"))
    obj = base.__new__(cls)
    for k, c in zip(keys, items):
        base.__setitem__(obj, k, _build(c, it, objects, memo))
    for k, c in attributes:
        _put(obj, k, _build(c, it, objects, memo))
    if factory is not None:
        obj.default_factory = factory
    return obj


def is_plain(spec) -> bool:
    """Specs that generated code can return directly (tuples, lists, dicts of leaves)."""
    kind = spec[0]
    if kind == "leaf":
        return True
    if kind is tuple or kind is list:
        return all(is_plain(c) for c in spec[1])
    if kind is dict:
        return all(type(k) in (str, int) for k in spec[1]) and all(is_plain(c) for c in spec[2])
    return False
