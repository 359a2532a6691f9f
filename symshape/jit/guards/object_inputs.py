"""Arguments that are Python objects, walked by the prologue Builder.

An object holding tensors (a KV cache, a dataclass of tensors, a ModelOutput)
is passed to the traced code as itself (``_object``): ``_contents`` finds its
tensors and ints (inputs of their own, swapped for proxies while tracing) and
the containers under it, whose writes are replayed (writes.py). A dict is
checked by its keys (``_dict``); ``_pytree`` flattens other torch.utils._pytree
nodes; ``_modules_in`` walks modules an object holds.
"""

from __future__ import annotations

import collections
import functools
import re
import types
import weakref

import torch
from torch import nn

from symshape.jit.guards.hidden_state import hidden_state, iterator_input
from symshape.jit.guards.state import (
    ObjectGuard,
    _instance_dict,
    _slots,
    is_plain_object,
    viewed,
)
from symshape.trace.errors import TracingError


class UntraceableInput(TracingError):
    """An input no trace can stand for (a tensor subclass): the call runs eagerly,
    unless ``fullgraph=True``, which raises this."""


def iterator_refused(label: str, v) -> UntraceableInput:
    """The refusal of an iterator input at ``label`` (state.iterator_input)."""
    return UntraceableInput(". Fix: ".join(iterator_input(label, v)))


class ObjectInputs:
    """Builder methods for object arguments (mixed into prologue.Builder)."""

    def key_swaps(self) -> list:
        """``(mapping, "key", tensor, its proxy)`` for each tensor key of a watched
        mapping that is one of the trace's inputs (known once the walk is done)."""
        return [
            (obj, "key", k, self.proxy_of[id(k)])
            for obj, k in self.tensor_keys
            if id(k) in self.proxy_of
        ]

    def _swap(self, container, kind: str, new) -> None:
        """Items (or attributes) of ``container`` that the trace sees as proxies."""
        items = new.items() if isinstance(new, dict) else enumerate(new)
        for k, v in items:
            old = getattr(container, k) if kind == "attr" else _raw_item(container, k)
            if v is not old:
                self.swaps.append((container, kind, k, v))

    def _contents(
        self, obj, src: str, label: str, path: str, out, seen: set, holes: set, values: bool
    ):
        """Watch the containers inside an argument object (its attributes, and the
        lists, dicts, tuples and objects under them) for writes. With ``values``
        (it holds tensors), each tensor, int and float in them is an input of its
        own (``holes``: where they are); the object's other state is its
        ObjectGuard's. Returns ``obj``, or a new tuple of proxies for a tuple."""
        t = type(obj)
        if id(obj) in seen or len(seen) > 2000:
            return obj
        seen.add(id(obj))
        new = {}  # (kind, key) -> what the traced code finds there
        for kind, k, v, suffix in _parts(obj):
            where = (f"{src}{suffix}", f"{label}{suffix}", f"{path}{suffix}")
            if suffix is None:  # a dict subclass's item, past its own __getitem__
                get = self.const(dict.__getitem__, "_dict_item")
                where = (f"{get}({src}, {k!r})", f"{label}[{k!r}]", f"{get}({path}, {k!r})")
            tv = type(v)
            if values and (isinstance(v, torch.Tensor) or tv is int or tv is float):
                holes.add((id(obj), k))
                if isinstance(v, torch.Tensor):
                    new[kind, k] = p = self._tensor(v, where[0], where[1], out, False)
                    if self.proxy_of.get(id(v)) is p:  # the attributes the code sets on it
                        self.tensor_args.append((v, p, where[2]))
                else:
                    new[kind, k] = self.walk(v, where[0], where[1], out, path=where[2])
            elif tv is list or _mapping(v) or (tv is tuple and values) or is_plain_object(v):
                new[kind, k] = self._contents(v, *where, out, seen, holes, values)
            elif tv is set:  # watched for writes (its items are the object's snapshot's)
                self.tracked.setdefault(id(v), (v, where[2]))
                new[kind, k] = v
            elif hidden_state(v):
                raise iterator_refused(where[1], v)
            else:
                new[kind, k] = v  # guarded by the object's snapshot
        if t is tuple:
            made = tuple(new.values())
            return made if any(a is not b for a, b in zip(made, obj)) else obj
        if _mapping(obj):  # a key that is a tensor the trace takes as an input (a parameter
            # an optimizer's state is keyed by) is its proxy while tracing (key_swaps)
            self.tensor_keys += [(obj, k) for k in obj if isinstance(k, torch.Tensor)]
        self.tracked.setdefault(id(obj), (obj, path))
        for kind in ("attr", "item"):
            self._swap(obj, kind, {k: v for (w, k), v in new.items() if w == kind})
        return obj

    def _aliasing(self, value, src: str, label: str, out: list) -> None:
        """Which of the objects of one class passed as arguments are one object
        (`len({a, b})`, `a is b`): as when traced, on every call."""
        for other, osrc, olabel in self.object_args:
            if type(other) is type(value):
                same = other is value
                self.fail(
                    f"{src} is {'not ' if same else ''}{osrc}",
                    f"{label} is {'' if same else 'not '}the object {olabel} is",
                    None,
                    into=out,
                )
        self.object_args.append((value, src, label))

    def _partial(self, value, src: str, label: str, out: list, path: str):
        """A ``functools.partial``: its function, arguments and keywords, each as an
        argument would be (tensors among them are inputs, the function an identity)."""
        loc = self.local(f"_{label}")
        out.append(f"{loc} = {src}")
        self.fail(
            f"type({loc}) is not {self.const(functools.partial, '_T')}",
            f"{label} is a functools.partial",
            f"type({loc}).__name__",
            into=out,
        )
        func, args = (
            self.walk(getattr(value, a), f"{loc}.{a}", f"{label}.{a}", out, path=f"{path}.{a}")
            for a in ("func", "args")
        )
        keys = tuple(value.keywords)
        self.fail(
            f"tuple({loc}.keywords) != {keys!r}",
            f"{label} has the keywords {list(keys)}",
            f"tuple({loc}.keywords)",
            into=out,
        )
        kwargs = {  # each value walked: the new partial holds the trace's proxies
            k: self.walk(v, f"{loc}.keywords[{k!r}]", f"{label}.{k}", out, path=f"{path}.{k}")
            for k, v in value.keywords.items()
        }
        return functools.partial(func, *args, **kwargs)

    def _weakref(self, value, src: str, label: str, out: list, path: str):
        """A ``weakref.ref``: what it refers to now is walked as an argument would
        be (a tensor is an input, ``None`` once it died); the traced code gets a
        reference to what stands for it, so ``wr() is weight`` holds as in eager."""
        loc = self.local(f"_{label}")
        out.append(f"{loc} = {src}")
        self.fail(
            f"type({loc}) is not {self.const(weakref.ref, '_T')}",
            f"{label} is a weakref.ref",
            f"type({loc}).__name__",
            into=out,
        )
        target = value()
        seen = self.walk(target, f"{loc}()", f"{label}()", out, path=f"{path}()")
        return value if seen is target else weakref.ref(seen)

    def _mapping_proxy(self, value, src: str, label: str, out: list, path: str):
        """A ``types.MappingProxyType``: the mapping it shows is walked as a dict
        argument is (keys checked, values walked), so a change made through the
        mapping's other names is seen; the traced code gets the proxy itself."""
        loc = self.local(f"_{label}")
        out.append(f"{loc} = {src}")
        self.fail(
            f"type({loc}) is not {self.const(types.MappingProxyType, '_T')}",
            f"{label} is a mappingproxy",
            f"type({loc}).__name__",
            into=out,
        )
        shown = self.const(viewed, "_viewed")
        target = viewed(value)
        seen = self.walk(target, f"{shown}({loc})", f"{label}.mapping", out, f"{shown}({path})")
        return value if seen is target else types.MappingProxyType(seen)

    def _pytree(self, value, node, src: str, label: str, out, path: str):
        """A torch.utils._pytree node (transformers' ModelOutput): guarded by
        type and context, its children walked; the traced code gets a new one."""
        children, context = node.flatten_fn(value)
        loc, kids = self.local(f"_{label}"), self.local(f"_{label}_children")
        T, fl, cx = (
            self.const(type(value), "_T"),
            self.const(node.flatten_fn, "_flatten"),
            self.const(context, "_context"),
        )
        out.append(f"{loc} = {src}")
        self.fail(
            f"type({loc}) is not {T}",
            f"{label} is a {type(value).__name__}",
            f"type({loc}).__name__",
            into=out,
        )
        out.append(f"{kids}, _ctx = {fl}({loc})")
        self.fail(f"_ctx != {cx}", f"{label} has the structure {context!r}", "_ctx", into=out)
        names = context if isinstance(context, list) and len(context) == len(children) else None
        items = [
            self.walk(
                c,
                f"{kids}[{i}]",
                f"{label}.{names[i]}" if names and isinstance(names[i], str) else f"{label}[{i}]",
                out,
                path=f"{fl}({path})[0][{i}]",
            )
            for i, c in enumerate(children)
        ]
        return node.unflatten_fn(items, context)

    def _modules_in(self, obj, src: str, label: str, out, depth: int, path: str = "") -> None:
        """Modules held by an argument object (``holder.net``) are walked like
        module arguments: parameters read each call, their state guarded."""
        d = getattr(obj, "__dict__", None)
        if d is None or depth > 2:
            return
        for name, v in list(d.items()):
            if not (isinstance(name, str) and name.isidentifier()):
                continue
            if isinstance(v, nn.Module) and id(v) not in self.module_locals:
                self.roots.append(v)
                self.module(v, f"{src}.{name}", f"{label}.{name}", out, f"{path}.{name}")
            elif is_plain_object(v):
                self._modules_in(
                    v, f"{src}.{name}", f"{label}.{name}", out, depth + 1, f"{path}.{name}"
                )

    def _object(self, value, src: str, label: str, out: list, path: str):
        """A plain Python object (or a set): checked by type and state, its containers
        watched for writes; one that holds tensors is flattened, its tensors and ints
        inputs of their own (fetched after its guard)."""
        t = type(value)
        if t in (set, frozenset) and any(isinstance(v, torch.Tensor) for v in value):
            raise UntraceableInput(
                f"{label} is a {t.__name__} of tensors, which a trace cannot stand for: "
                "its items are found by identity (`x in s` of the tensor passed in), and "
                "its order is their hashes'. Fix: pass the tensors in a list or a tuple"
            )
        if _ARGUMENT.fullmatch(src):
            self._aliasing(value, src, label, out)
        inner: list = []  # the fetches of its tensors and ints, after its guard
        holes: set = set()
        if isinstance(value, set):  # what the call adds to it is replayed (writes.py)
            self.tracked.setdefault(id(value), (value, path))
        if t not in (set, frozenset):
            # its containers are watched for writes; if it holds tensors, it is
            # flattened: its tensors and ints are inputs of their own
            self._contents(value, src, label, path, inner, set(), holes, holds_tensors(value))
        og = ObjectGuard(value, label, holes=holes)
        self.objects.append((og, value))
        g = self.const(og, "_state")
        self.fail(
            f"not {g}({src})",
            f"{label} is as when traced",
            f"{g}.why({src})",
            kind="state",
            into=out,
        )
        if t not in (set, frozenset):
            self._modules_in(value, src, label, out, 0, path)
        out.extend(inner)
        return value

    def _dict(self, value: dict, src: str, label: str, out: list, path: str) -> dict:
        """A dict argument (an ``OrderedDict``, a ``defaultdict`` and its factory too):
        its keys checked on every call, its values walked; the dict itself is handed to
        the function (its writes are found and replayed)."""
        loc = self.local(f"_{label}")
        out.append(f"{loc} = {src}")
        keys = tuple(value)
        bad = [k for k in keys if not _plain_key(k)]
        if bad:  # the call runs eagerly (fullgraph=True: this error)
            raise UntraceableInput(
                f"{label}: a dict keyed by {type(bad[0]).__name__} cannot be traced (its "
                "keys are compared on every call, and this one has no value to compare "
                "by). Fix: key it by str, int, a tuple or another value, or pass the "
                "values as a list."
            )
        ks = repr(keys) if all(type(k) in (str, int) for k in keys) else self.const(keys)
        t = type(value)
        cond = f"type({loc}) is not {'dict' if t is dict else self.const(t, '_type')}"
        if t is collections.defaultdict:  # what a missing key makes
            cond += f" or {loc}.default_factory is not {self.const(value.default_factory)}"
        self.fail(
            f"{cond} or tuple({loc}) != {ks}",
            f"{label} is a {t.__name__} with keys {list(keys)}",
            f"tuple({loc}) if isinstance({loc}, dict) else type({loc}).__name__",
            into=out,
        )
        self.tracked[id(value)] = (value, path)
        new = {}
        for k, v in value.items():
            ksrc = repr(k) if type(k) in (str, int) else self.const(k, "_key")
            new[k] = self.walk(v, f"{loc}[{ksrc}]", f"{label}[{k!r}]", out, path=f"{path}[{ksrc}]")
        self._swap(value, "item", new)
        return value


_ARGUMENT = re.compile(r"args\[\d+\]|kwargs\['[^']*'\]")  # the call's own arguments


def _parts(obj) -> list:
    """``(kind, key, value, source suffix)`` of what an argument object holds: a
    list's or tuple's items, a dict's, an object's attributes, and a list or dict
    subclass's attributes and items both (a ModelOutput's field is both)."""
    t = type(obj)
    if t in (list, tuple):
        return [("item", i, v, f"[{i}]") for i, v in enumerate(obj)]
    if _mapping(obj):
        return [("item", k, v, f"[{k!r}]") for k, v in obj.items() if type(k) in (str, int)]
    d = _instance_dict(obj) or {}
    names = [k for k in d if isinstance(k, str) and k.isidentifier()]
    names += [n for n in _slots(t) if hasattr(obj, n)]
    out = [("attr", k, d[k] if k in d else getattr(obj, k), f".{k}") for k in names]
    if isinstance(obj, list):
        out += [("item", i, v, f"[{i}]") for i, v in enumerate(list.__iter__(obj))]
    if isinstance(obj, dict):  # (None: fetched past the subclass's own __getitem__)
        out += [("item", k, v, None) for k, v in dict.items(obj) if type(k) in (str, int)]
    return out


def _raw_item(container, k):
    """``container[k]``, past a dict or list subclass's own ``__getitem__``."""
    if isinstance(container, dict):
        return dict.__getitem__(container, k)
    if isinstance(container, list):
        return list.__getitem__(container, k)
    return container[k]


def _mapping(v) -> bool:
    """A dict, or a dict subclass in C (``defaultdict``, ``OrderedDict``,
    ``Counter``): walked by its items. A subclass of the program's is an object."""
    return isinstance(v, dict) and (type(v) is dict or not is_plain_object(v))


def holds_tensors(v, depth: int = 0, seen=None) -> bool:
    """Does a plain object hold a tensor (in its attributes, lists, dicts, tuples)?"""
    seen = set() if seen is None else seen
    if isinstance(v, torch.Tensor):
        return True
    if depth > 8 or id(v) in seen:
        return False
    seen.add(id(v))
    t = type(v)
    if t in (list, tuple):
        return any(holds_tensors(x, depth + 1, seen) for x in v)
    if _mapping(v):
        return any(holds_tensors(x, depth + 1, seen) for x in v.values())
    if is_plain_object(v):
        d = _instance_dict(v) or {}
        vals = list(d.values()) + [getattr(v, n, None) for n in _slots(t)]
        # a list subclass's items, past its own __iter__ (eager's x[0] never calls it)
        vals += list(list.__iter__(v)) if isinstance(v, list) else []
        return any(holds_tensors(x, depth + 1, seen) for x in vals)
    return False


def _plain_key(k) -> bool:
    """A dict key the prologue can compare with ``==`` on every call: a value
    (str, int, float, bool, None, a torch.Size, a tuple of values) or an object
    compared by identity (a class, a function, an enum member)."""
    if k is None or type(k) in (str, int, float, bool, torch.Size):
        return True
    if type(k) is tuple:
        return all(_plain_key(x) for x in k)
    return not isinstance(k, torch.Tensor) and type(k).__eq__ is object.__eq__
