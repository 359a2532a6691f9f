"""Subclasses of list, tuple, dict and OrderedDict that the program defines, met
as results and as globals: results are rebuilt as the program's own classes with
their items and attributes in place; a subclass's ``__getitem__`` that computes
something (transformers' ClassInstantier) is never what symshape reads or writes
back. Differential: traced at one size, run at others, against eager."""

from __future__ import annotations

import collections

import torch

import symshape


class Calls(list):
    def __call__(self, *args):
        return None


class Pair(tuple):
    pass


class Record(dict):
    pass


def _results(a, b):
    calls = Calls([a + 1])
    calls.extend(Calls([b + 2]))
    calls.n = a.shape[0]
    rec = Record(item=a * 2)
    rec.attr = a + 100  # an attribute and an item holding different tensors
    rec.same = rec["item"]
    return calls, Pair((a, 1)), rec


def test_list_tuple_and_dict_subclasses_come_back_whole():
    jf = symshape.jit(_results, dynamic=True)
    for n in (3, 3, 5, 1):
        a, b = torch.randn(n), torch.randn(n)
        got, want = jf(a, b), _results(a, b)
        for g, w in zip(got, want):
            assert type(g) is type(w)
            assert vars(g).keys() == vars(w).keys()
        torch.testing.assert_close(list(got[0]), list(want[0]))
        assert got[0].n == want[0].n == n
        torch.testing.assert_close(tuple(got[1]), tuple(want[1]))
        torch.testing.assert_close(dict(got[2]), dict(want[2]))
        torch.testing.assert_close(got[2].attr, want[2].attr)
        assert got[2].same is got[2]["item"]
    assert jf.stats.compiles == 1, jf.stats.recompile_reasons


class Instantiates(collections.OrderedDict):
    """transformers' ClassInstantier: an item is a class (and its arguments); reading
    it makes an instance."""

    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


ACTS = Instantiates({"relu": (torch.nn.ReLU, {"inplace": False}), "tanh": torch.nn.Tanh})


def _activate(x, name):
    return ACTS[name](x)


def test_a_global_mapping_whose_getitem_makes_objects():
    jf = symshape.jit(_activate, dynamic=True)
    before = list(dict.items(ACTS))
    for name, n in (("tanh", 4), ("relu", 4), ("tanh", 2)):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x, name), _activate(x, name))
    assert list(dict.items(ACTS)) == before  # its stored classes, not instances
    ACTS["relu"] = torch.nn.Sigmoid
    try:
        x = torch.randn(3)
        torch.testing.assert_close(jf(x, "relu"), torch.sigmoid(x))
    finally:
        ACTS["relu"] = before[0][1]


class Processors(list):  # transformers' LogitsProcessorList: called, iterating over itself
    def __call__(self, x):
        for p in self:
            x = p(x)
        return x


def _merge(x, default, extra):  # dynamo's test_merge_criteria_processor_list
    if len(extra):
        default.extend(extra)
    return default(x) + len(default)


def test_a_list_subclass_argument_is_guarded_by_its_items():
    jf = symshape.jit(_merge, dynamic=True)
    for n, (left, right) in [
        (3, ([torch.nn.ReLU()], [])),
        (5, ([torch.nn.ReLU(), torch.nn.Sigmoid()], [])),  # longer: traced again
        (4, ([torch.nn.Tanh()], [torch.nn.SiLU()])),  # extended inside
        (6, ([torch.nn.ReLU()], [])),
    ]:
        x = torch.randn(n)
        mine, theirs = Processors(left), Processors(list(left))
        got, want = jf(x, mine, Processors(right)), _merge(x, theirs, Processors(right))
        torch.testing.assert_close(got, want)
        assert len(mine) == len(theirs) and all(a is b for a, b in zip(mine, theirs))


class Tensors(list):
    pass


def test_tensors_in_a_list_subclass_are_inputs_read_per_call():
    def f(x, ts):
        ts.append(x * 2)
        return x + sum(ts[:-1]) + len(ts)

    jf = symshape.jit(f, dynamic=True)
    for n in (3, 3, 5, 2):
        mine = Tensors([torch.randn(n), torch.randn(n)])
        theirs = Tensors(list(mine))
        torch.testing.assert_close(jf(torch.ones(n), mine), f(torch.ones(n), theirs))
        assert len(mine) == 3
        torch.testing.assert_close(mine[2], theirs[2])
    assert jf.stats.compiles == 1, jf.stats.recompile_reasons


class Tags(set):
    pass


class FrozenTags(frozenset):
    pass


def _sets(x):
    s = {"one", "two", "three"}
    u = Tags({"one", "four"})
    s &= u
    u &= s  # the program's set subclass, updated in place
    u.n = x.shape[0]
    return x * len(u), s, u, FrozenTags({"a", x.shape[0]})


def test_set_and_frozenset_subclasses_come_back_with_their_items():
    """A set subclass the call made came back empty (rebuilt as a plain object)."""
    jf = symshape.jit(_sets)
    for n in (2, 3, 5):
        x = torch.randn(n)
        got, want = jf(x), _sets(x)
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
        assert [type(v) for v in got] == [type(v) for v in want] and got[2].n == want[2].n


def test_a_returned_model_output_keeps_its_items_and_attributes_as_set():
    """transformers' ModelOutput: a key set to None stays a key; an attribute set
    to None beside its item stays None (its constructor keeps neither)."""
    from transformers.modeling_outputs import BaseModelOutput, BaseModelOutputWithPooling

    def pooled(x):
        r = BaseModelOutputWithPooling(last_hidden_state=x + 1)
        r["pooler_output"] = None
        return r

    def hidden(x):
        o = BaseModelOutput(last_hidden_state=x * 2, attentions=x.sum(0))
        o.attentions = None
        return o

    for fn in (pooled, hidden):
        jf = symshape.jit(fn)
        for n in (2, 3, 5):
            x = torch.randn(n, 4)
            got, want = jf(x), fn(x)
            assert type(got) is type(want) and list(got.keys()) == list(want.keys())
            assert vars(got).keys() == vars(want).keys()
            for k in vars(want):
                a, b = getattr(got, k), getattr(want, k)
                assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), k
            for k in want:
                a, b = got[k], want[k]
                assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), k
            assert got.last_hidden_state is got["last_hidden_state"]


def _attentions_or_not(o):
    if o.attentions is not None:
        return o.last_hidden_state + o.attentions
    return o.last_hidden_state * 2


def _writes_fields(o):
    o["hidden_states"] = o.last_hidden_state * 3
    o.attentions = o[0] + 1
    return o[1].sum()


def test_a_model_output_argument_is_the_object_it_is():
    """transformers' ModelOutput passed in: its attribute set to None beside its
    item is None, a key its constructor does not know is read, and what the call
    writes into it (items, attributes) is written into the caller's object."""
    from transformers.modeling_outputs import BaseModelOutput

    def made(n, none):
        o = BaseModelOutput(last_hidden_state=torch.randn(n), attentions=torch.ones(n))
        if none:
            o.attentions = None  # its item stays
        o["extra"] = torch.zeros(n)  # not a field
        return o

    ja, jw = symshape.jit(_attentions_or_not), symshape.jit(_writes_fields)
    for n, none in [(3, True), (3, False), (4, True), (5, False)]:
        torch.manual_seed(n)
        o, p = made(n, none), made(n, none)
        p.last_hidden_state = p["last_hidden_state"] = o.last_hidden_state.clone()
        assert torch.equal(ja(o), _attentions_or_not(o))
        assert torch.equal(jw(o), _writes_fields(p))
        assert list(o.keys()) == list(p.keys()) and vars(o).keys() == vars(p).keys()
        assert torch.equal(o.hidden_states, p.hidden_states)
        assert torch.equal(o["attentions"], p["attentions"]) and o.attentions is o["attentions"]


class _Config(dict):
    def __getattr__(self, name):  # a missing name raises KeyError, not AttributeError
        return self[name]


def _offset(cfg, x, y):
    return x + y + cfg.offset


def test_a_dict_subclass_whose_getattr_raises_key_error():
    """dynamo's test_user_getattr1: symshape's own lookups on the argument (a
    wrapped function's `func`) must not run the class's __getattr__ (a KeyError)."""
    for fullgraph in (False, True):
        jf = symshape.jit(_offset, fullgraph=fullgraph)
        cfg = _Config(offset=5)
        for n, offset in [(10, 5), (10, 7), (4, 7)]:
            cfg["offset"] = offset
            x = torch.randn(n)
            assert torch.equal(jf(cfg, x, x), _offset(cfg, x, x))


class _Counting(dict):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def __getitem__(self, key):
        self.calls += 1
        return super().__getitem__(key) + 1


def _sum_items(x, d):
    d["d"] = torch.ones(1) * 4 if isinstance(d.get("t"), torch.Tensor) else 4
    return x * d["a"] + d["b"] + d["c"] + d["d"]


def test_a_dict_subclasses_getitem_runs_as_often_as_in_eager():
    """dynamo's test_overridden_get_item: symshape's own reads of the argument's
    items (its guard, its tensors' fetches, its swaps) go past the override."""
    for with_tensor in (False, True):
        seen = []
        for fn in (_sum_items, symshape.jit(_sum_items)):
            d = _Counting(a=2, b=3, c=5)
            if with_tensor:
                d["t"] = torch.zeros(1)
            out = []
            for k, n in enumerate((4, 4, 6)):
                out.append((fn(torch.ones(n), d).tolist(), d.calls, dict.__repr__(d)))
                dict.__setitem__(d, "a", k + 7)
            seen.append(out)
        assert seen[1] == seen[0]


class WithNewList(list):
    def __new__(cls, items, tag=None):  # wants arguments unpickling does not pass
        self = super().__new__(cls)
        self.tag = tag
        return self

    def __init__(self, items, tag=None):
        super().__init__(items)


class WithNewDict(dict):
    def __new__(cls, value):
        self = super().__new__(cls)
        self.first = value
        return self

    def __init__(self, value):
        super().__init__(a=value)


def _made_with_new(x):
    return WithNewList([x + 1], tag=3), WithNewDict(x * 2)


def test_a_subclass_whose_new_wants_arguments_is_returned_as_eager_makes_it():
    jf = symshape.jit(_made_with_new, fullgraph=True)
    for n in (2, 2, 5):
        x = torch.randn(n)
        (gl, gd), (wl, wd) = jf(x), _made_with_new(x)
        assert type(gl) is WithNewList and type(gd) is WithNewDict
        torch.testing.assert_close((list(gl), dict(gd)), (list(wl), dict(wd)))
        assert gl.tag == wl.tag == 3
        torch.testing.assert_close(gd.first, wd.first)
        assert gd.first is gd["a"]


class Guarded(list):
    """A list subclass whose own iteration raises: eager's x[0] never calls it."""

    def __iter__(self):
        raise RuntimeError("__iter__ called")

    def __len__(self):
        raise RuntimeError("__len__ called")


def _first_two(x):
    return x[0] + x[1]


def test_a_list_subclass_is_read_past_its_own_iteration():
    jf = symshape.jit(_first_two)
    for n in (3, 3, 5):
        x = Guarded()
        list.extend(x, [torch.randn(n), torch.randn(n)])
        torch.testing.assert_close(jf(x), _first_two(x))


class _Set(set):
    pass


class _Frozen(frozenset):
    pass


class _Deque(collections.deque):
    pass


_HELD_SET = _Set([1, 2])


def _sums(s, x):
    return x * len(s) + sum(s) + sum(_HELD_SET)


def test_the_items_of_set_frozenset_and_deque_subclasses_are_checked():
    """dynamo's UserDefinedSetTests / UserDefinedFrozensetTests with the container
    an argument: another object of the class, or the same one changed, is a new
    state (its items had not been checked)."""
    for cls in (_Set, _Frozen, _Deque):
        jf = symshape.jit(_sums, dynamic=True)
        for items, n in (([0, 1], 2), ([0, 1, 2, 3], 2), ([0, 1, 2, 3], 5), ([7], 3)):
            s, x = cls(items), torch.ones(n)
            torch.testing.assert_close(jf(s, x), _sums(s, x))
        s = cls([1])
        torch.testing.assert_close(jf(s, x), _sums(s, x))
        if cls is not _Frozen:
            s.add(4) if cls is _Set else s.append(4)  # the same object, changed
            torch.testing.assert_close(jf(s, x), _sums(s, x))
    jf = symshape.jit(_sums, dynamic=True)
    s, x = _Set([1]), torch.ones(2)
    torch.testing.assert_close(jf(s, x), _sums(s, x))
    _HELD_SET.add(10)  # a global one, changed
    torch.testing.assert_close(jf(s, x), _sums(s, x))


class _Tagged(list):
    pass


class _TaggedSet(set):
    pass


def _appends_a_size(lst, x):
    if isinstance(lst, set):
        lst.add(x.shape[0])
    else:
        lst.append(x.shape[0])
    return x + len(lst)


def test_a_container_subclass_with_attributes_keeps_eagers_ints():
    """dynamo's CustomNewListTests with the list an argument that has an attribute:
    the call that traces with a symbolic size had left its SymInts in the
    caller's list (its items were not put back, only its attributes)."""
    for cls in (_Tagged, _TaggedSet):
        jf = symshape.jit(_appends_a_size, dynamic=True)
        mine, theirs = cls([3]), cls([3])
        mine.tag = theirs.tag = 0
        for n in (2, 2, 4, 5):
            torch.testing.assert_close(
                jf(mine, torch.ones(n)), _appends_a_size(theirs, torch.ones(n))
            )
            assert list(mine) == list(theirs) and all(type(v) is int for v in mine)
            assert mine.tag == theirs.tag


class _Bumping(set):
    def add(self, i):
        super().add(i + 1)


def _adds_three(s, x):
    s.add(3)
    return x + max(s)


def test_a_set_subclass_own_add_runs_once_per_call():
    """dynamo's CustomSet tests with `add` overridden, the set an argument: the
    write-back had called the subclass's add again with the element it added."""
    jf = symshape.jit(_adds_three, dynamic=True)
    mine, theirs = _Bumping([1, 2]), _Bumping([1, 2])
    for n in (2, 2, 4):
        torch.testing.assert_close(jf(mine, torch.ones(n)), _adds_three(theirs, torch.ones(n)))
        assert sorted(mine) == sorted(theirs) == [1, 2, 4]
