"""Writes into containers and objects that globals hold a level or two down
(``STATE["log"].append(y)``, ``BOXES[0].last = y``), into dict subclasses
(``defaultdict``, ``Counter``, ``OrderedDict``) and deques are replayed on every
call with that call's values, and their reads are guarded. They used to leave
the trace's placeholders in the container (an error at the next use), or, for a
``defaultdict``'s new list, keep the traced size in it."""

import collections
import functools

import pytest
import torch

import symshape

SIZES = (3, 4, 4, 6)


class _Box:
    pass


STATE: dict = {}
BOXES: list = []
DD: collections.defaultdict = collections.defaultdict(list)
COUNTS: collections.Counter = collections.Counter()
RECENT: collections.deque = collections.deque(maxlen=2)


def _reset():
    STATE.clear()
    STATE["log"] = []
    BOXES[:] = [_Box()]
    DD.clear()
    COUNTS.clear()
    RECENT.clear()


def _nested_list(x):
    STATE["log"].append(x * 2)
    return x + len(STATE["log"])


def _object_in_a_list(x):
    BOXES[0].last = x.sum()
    BOXES[0].n = getattr(BOXES[0], "n", 0) + 1
    return x * BOXES[0].n


def _defaultdict_of_lists(x):
    DD["sizes"].append(x.shape[0])
    return x * len(DD["sizes"])


def _counter(x):
    COUNTS[x.shape[0]] += 1
    return x * COUNTS[x.shape[0]]


def _bounded_deque(x):
    RECENT.append(x * 3)
    return x + len(RECENT)


def _state():
    def norm(v):
        if isinstance(v, torch.Tensor):
            return ("t", v.tolist())
        if isinstance(v, (list, tuple, collections.deque)):
            return [norm(a) for a in v]
        if isinstance(v, dict):
            return {k: norm(a) for k, a in v.items()}
        return v

    return norm([STATE, [vars(b) for b in BOXES], dict(DD), dict(COUNTS), list(RECENT)])


@pytest.mark.parametrize(
    "fn", [_nested_list, _object_in_a_list, _defaultdict_of_lists, _counter, _bounded_deque]
)
def test_writes_below_a_global_are_eagers_on_every_call(fn):
    torch.manual_seed(0)
    inputs = [torch.randn(n) for n in SIZES]
    _reset()
    want = [fn(x) for x in inputs]
    want_state = _state()
    _reset()
    jf = symshape.jit(fn)
    got = [jf(x) for x in inputs]
    assert _state() == want_state
    for g, w in zip(got, want):
        assert torch.equal(g, w)


LAST = None


def _only_assigns_a_global(x):
    global LAST
    LAST = x.sum(0)  # the function loads no global: its write is still replayed
    return x + 1


def test_a_global_the_function_only_assigns_holds_each_calls_tensor():
    jf = symshape.jit(_only_assigns_a_global)
    for n in SIZES:
        x = torch.randn(n, 3)
        assert torch.equal(jf(x), x + 1)
        assert type(LAST) is torch.Tensor and torch.equal(LAST, x.sum(0)), n


class _MappingConfig:
    """A config whose ``__getattr__`` raises KeyError for names it lacks."""

    def __init__(self):
        self._d = {"scale": 2}

    def __getattr__(self, k):
        return self.__dict__["_d"][k]


CFG = _MappingConfig()


def test_a_global_config_with_a_raising_getattr_is_read_and_guarded():
    def fn(x):
        return x * CFG.scale

    jf = symshape.jit(fn)
    for n, scale in [(3, 2), (4, 2), (4, 5)]:
        CFG._d["scale"] = scale
        x = torch.randn(n)
        assert torch.equal(jf(x), fn(x)), (n, scale)
    CFG._d["scale"] = 2


class _Registry:
    seen: list = []
    count = 0

    def bump(self, x):
        type(self).count += x.shape[0]  # a class attribute written through the instance
        return x + type(self).count


def _class_held_list(x):
    _Registry.seen.append(x.shape[0])
    return x * len(_Registry.seen)


def _default_list(x, acc=[]):  # noqa: B006 (the pattern under test)
    acc.append(x.shape[0])
    return x * len(acc)


@pytest.mark.parametrize("which", ["class list", "default list", "class attribute"])
def test_state_held_by_classes_and_defaults_is_read_and_written_per_call(which):
    _Registry.seen, _Registry.count = [], 0
    _default_list.__defaults__[0].clear()
    fn = {"class list": _class_held_list, "default list": _default_list}.get(which)
    fn = fn or _Registry().bump
    jf = symshape.jit(fn)
    sizes = (4, 4, 3, 5)
    got = [jf(torch.ones(n)) for n in sizes]
    state = (list(_Registry.seen), _Registry.count, list(_default_list.__defaults__[0]))
    _Registry.seen, _Registry.count = [], 0
    _default_list.__defaults__[0].clear()
    want = [fn(torch.ones(n)) for n in sizes]
    assert [type(v) for v in state[2]] == [int] * len(state[2])
    assert type(state[1]) is int
    assert state == (list(_Registry.seen), _Registry.count, list(_default_list.__defaults__[0]))
    for g, w in zip(got, want):
        assert torch.equal(g, w)


SEEN_SIZES: frozenset = frozenset()
KEYED: dict = {}


def _sizes_as_keys(x):
    global SEEN_SIZES
    SEEN_SIZES = SEEN_SIZES | {x.shape[0]}
    KEYED[("n", x.shape[0])] = len(KEYED)
    return {x.shape[0]: x + 1, (x.shape[0], 1): len(SEEN_SIZES)}


def test_sizes_used_as_keys_and_set_members_are_ints_after_every_call():
    """A size used as a dict key or a set member leaves the trace as this call's int
    (hashing it already made the trace particular to it); after a dynamic retrace
    the trace's SymInt used to stay in the global and the returned dict."""
    global SEEN_SIZES
    runs = []
    for f in (_sizes_as_keys, symshape.jit(_sizes_as_keys)):
        SEEN_SIZES = frozenset()
        KEYED.clear()
        outs = [f(torch.ones(n)) for n in (4, 4, 3, 5)]
        keys = [list(o) for o in outs]
        assert all(type(k) in (int, tuple) for ks in keys for k in ks)
        assert all(type(v) is int for v in SEEN_SIZES)
        assert all(type(k[1]) is int for k in KEYED)
        runs.append(
            (keys, set(SEEN_SIZES), dict(KEYED), [o[(k[0], 1)] for o, k in zip(outs, keys)])
        )
    assert runs[0] == runs[1]


DEEP: dict = {}


def _three_levels_down(x):
    DEEP["l1"][0].m["t"] = x.relu()
    DEEP["l1"][0].m["n"] = DEEP["l1"][0].m.get("n", 0) + x.shape[0]
    return x * DEEP["l1"][0].m["n"]


def test_writes_three_levels_below_a_global_are_replayed():
    runs = []
    for f in (_three_levels_down, symshape.jit(_three_levels_down)):
        box = _Box()
        box.m = {}
        DEEP["l1"] = [box]
        torch.manual_seed(0)
        outs = [f(torch.randn(n, 3)) for n in (4, 4, 3)]
        m = DEEP["l1"][0].m
        assert type(m["t"]) is torch.Tensor
        runs.append((outs, m["t"], m["n"]))
    (eo, et, en), (jo, jt, jn) = runs
    assert en == jn and torch.equal(et, jt)
    assert all(torch.equal(a, b) for a, b in zip(eo, jo))


CACHED_CALLS: list = []


@functools.cache
def _cached_double(n):
    CACHED_CALLS.append(n)  # a global written behind lru_cache's C wrapper
    return n * 2


def _uses_a_cached_helper(x):
    return x * _cached_double(x.shape[0])


def test_a_helper_behind_lru_cache_is_walked_for_its_globals():
    runs = []
    for f in (_uses_a_cached_helper, symshape.jit(_uses_a_cached_helper)):
        CACHED_CALLS.clear()
        _cached_double.cache_clear()
        outs = [f(torch.ones(n)) for n in (4, 4, 3, 5)]
        assert all(type(n) is int for n in CACHED_CALLS)
        runs.append((outs, list(CACHED_CALLS)))
    (eo, ec), (jo, jc) = runs
    assert ec == jc == [4, 3, 5]
    assert all(torch.equal(a, b) for a, b in zip(eo, jo))


class _Slotted:
    __slots__ = ("d",)

    def __init__(self):
        self.d = {"c": 1, "a": 1}


_SLOTTED = _Slotted()


def _writes_into_a_slot(x):
    _SLOTTED.d["n"] = 1
    return x * len(_SLOTTED.d), list(_SLOTTED.d)


def test_a_container_held_in_a_slot_is_written_and_checked():
    """dynamo's OrderedSetTests with a global OrderedSet (its items live in a
    __slots__ dict): the call's write is replayed, and a change the caller makes
    between calls is seen."""
    jf = symshape.jit(_writes_into_a_slot, dynamic=True)
    mine, theirs = [], []
    for fn, out in ((jf, mine), (_writes_into_a_slot, theirs)):
        _SLOTTED.d = {"c": 1, "a": 1}
        for k in ("0", "1"):
            y, keys = fn(torch.ones(2))
            out.append((y.tolist(), keys))
            _SLOTTED.d[k] = 1
    assert mine == theirs
