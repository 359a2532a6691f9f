"""State of the objects a call receives, read and written as eager does: an input
tensor's storage size (read and guarded), what the function writes into a dict of
any dict class, an attribute it deletes, an instance-dict entry behind a read-only
property. Each traced at one state and run at others against eager."""

import collections

import pytest
import torch

import symshape


def _same_storage_size(a, n):  # FSDP's torch.distributed.fsdp._flat_param._same_storage_size
    return a.untyped_storage().size() // a.element_size() == n


def _storage_sizes(x, y):
    x = x + 1 if _same_storage_size(x, 100) else x - 1
    z = y * 2  # a tensor the trace allocates: its own elements
    return x, z + z.untyped_storage().nbytes() + y.untyped_storage().nbytes()


@pytest.mark.parametrize(
    "x", [torch.ones(10, 10), torch.ones(50), torch.ones(200)[:100]], ids=["100", "50", "view"]
)
def test_storage_sizes_are_read_and_guarded(x):
    """dynamo's test_flat_param_same_storage_size under fullgraph: an input's storage
    size is checked by the prologue (a view of a larger storage traces again)."""
    jf = symshape.jit(_storage_sizes, fullgraph=True)
    for args in ((torch.ones(10, 10), torch.ones(7)), (x, torch.ones(9))):
        got, want = jf(*args), _storage_sizes(*args)
        assert all(torch.equal(g, w) for g, w in zip(got, want))


def test_a_storage_data_pointer_is_refused_under_fullgraph():
    def fn(x):
        return x + (x.untyped_storage().data_ptr() > 0)

    with pytest.raises(symshape.TracingError, match="data_ptr"):
        symshape.jit(fn, fullgraph=True)(torch.ones(3))
    with pytest.warns(UserWarning, match="runs eagerly"):
        assert torch.equal(symshape.jit(fn)(torch.ones(3)), fn(torch.ones(3)))


def _counts_in(x, d):
    d["n"] += 1  # a defaultdict(int) makes the missing key
    d["seen"] = d.get("seen", 0) + x.shape[0]
    d.pop("drop", None)
    return x * d["n"]


@pytest.mark.parametrize(
    "make",
    [dict, collections.OrderedDict, lambda: collections.defaultdict(int)],
    ids=["dict", "OrderedDict", "defaultdict"],
)
def test_writes_into_a_dict_argument_of_any_dict_class_are_replayed(make):
    """An OrderedDict or defaultdict passed in was walked as a pytree and rebuilt:
    what the function wrote into it was lost, even on the first call."""
    eager, traced = make(), make()
    for d in (eager, traced):
        d.update(n=0, drop=1)
    jf = symshape.jit(_counts_in)
    for n in (2, 3, 3):
        x = torch.randn(n)
        assert torch.equal(jf(x, traced), _counts_in(x, eager))
        assert list(traced.items()) == list(eager.items()) and type(traced) is type(eager)


class _ReadOnly:
    def __init__(self, x, n):
        self.__dict__["x"] = x  # behind a read-only property of the same name
        self.__dict__["n"] = n

    @property
    def x(self):
        return self.__dict__["x"]

    @property
    def n(self):
        return self.__dict__["n"]


def test_an_instance_dict_entry_behind_a_read_only_property():
    """The tracer swaps the tensor in and out of the instance dict; it had gone
    through the property ("has no setter")."""
    fn = lambda o: o.x + o.__dict__["n"]  # noqa: E731
    jf = symshape.jit(fn)
    for n in (2, 3):
        o = _ReadOnly(torch.ones(n) * 3, n)
        assert torch.equal(jf(o), fn(o)) and torch.equal(o.x, torch.ones(n) * 3)


def _takes_the_tag(x):
    v = x.tag
    del x.tag
    return x * v


def test_an_attribute_deleted_from_an_input_tensor_is_deleted_on_every_call():
    jf = symshape.jit(_takes_the_tag)
    for n in (2, 3, 3):
        x, y = torch.ones(n), torch.ones(n)
        x.tag = y.tag = n
        assert torch.equal(jf(x), _takes_the_tag(y))
        assert not hasattr(x, "tag") and not hasattr(y, "tag")


class _Box:
    def __init__(self, t):
        self.t = t


def _tags_a_held_tensor(b, x):
    t = b.t
    t.seen = getattr(t, "seen", 0) + 1
    del b.t.tag
    return x * b.t


def test_attributes_set_on_a_tensor_an_argument_holds_are_set_on_every_call():
    jf = symshape.jit(_tags_a_held_tensor)
    for n in (2, 3, 3, 5):
        mine, eager = _Box(torch.full((n,), 2.0)), _Box(torch.full((n,), 2.0))
        mine.t.tag = eager.t.tag = "x"
        if n == 3:
            mine.t.seen = eager.t.seen = 10
        x = torch.randn(n)
        torch.testing.assert_close(jf(mine, x), _tags_a_held_tensor(eager, x))
        assert mine.t.seen == eager.t.seen
        assert not hasattr(mine.t, "tag") and not hasattr(eager.t, "tag")
