"""A global or closure variable the traced call writes into (``G["b"] += 1``,
``LOG.append(y)``), rebound between calls to another object, even an equal copy:
eager writes into the object the name holds at the call, so a trace, which
replays its writes into the object it was traced with, must not serve it."""

import torch

import symshape

G_DICT = {"a": 0, "b": 1}
G_LIST = [0, 1, 2]
G_STATE = {"log": [], "n": 0}


class Box:
    def __init__(self):
        self.y = 1


G_BOX = Box()


def _bump_dict(x):
    val = x + G_DICT["b"]
    G_DICT["b"] += 1
    return val


def _bump_list(x):
    val = x + G_LIST[1]
    G_LIST[1] += 1
    return val


def _bump_box(x):
    val = x + G_BOX.y
    G_BOX.y += 1
    return val


def _log_shape(x):
    G_STATE["log"].append(x.shape[0])
    return x * len(G_STATE["log"])


def _fresh():
    global G_DICT, G_LIST, G_BOX
    G_DICT, G_LIST, G_BOX = {"a": 0, "b": 1}, [0, 1, 2], Box()
    G_STATE["log"] = []  # an inner container rebound


def _state():
    return G_DICT["b"], G_LIST[1], G_BOX.y, list(G_STATE["log"])


def _run(fns, sizes):
    seen = []
    for n in sizes:
        _fresh()  # every name now holds a new object, equal to the last one's start
        outs = [f(torch.zeros(n)).tolist() for f in fns]
        seen.append((outs, _state()))
    return seen


def test_writes_go_to_the_object_the_global_holds_at_each_call():
    fns = [_bump_dict, _bump_list, _bump_box, _log_shape]
    sizes = (2, 2, 3, 3)
    want = _run(fns, sizes)
    jitted = [symshape.jit(f) for f in fns]
    assert _run(jitted, sizes) == want


def test_a_closure_variable_rebound_to_an_equal_dict_gets_the_write():
    def make():
        d = {"b": 1}

        def fn(x):
            val = x + d["b"]
            d["b"] += 1
            return val

        return fn

    for wrap in (lambda f: f, symshape.jit):
        fn = make()
        f, cell, after = wrap(fn), fn.__closure__[0], []
        for n in (2, 2, 3):
            cell.cell_contents = {"b": 1}
            assert f(torch.zeros(n)).tolist() == [1.0] * n
            after.append(cell.cell_contents["b"])
        assert after == [2, 2, 2]


G_READ = [1.0, 2.0]


def _reads_len(x):
    return x + len(G_READ)


def test_a_global_rebound_to_an_equal_list_is_watched_from_then_on():
    """A global list read, rebound to an equal copy (the guard accepts it), then
    appended to: the append had gone unseen (the fast check still watched the old
    list), and the trace's len was reused."""
    global G_READ
    jf, kept, x = symshape.jit(_reads_len), [], torch.zeros(1)
    G_READ = [1.0, 2.0]
    assert jf(x).item() == _reads_len(x).item() == 2
    for _ in range(2):
        kept.append(G_READ)  # the old lists stay alive: no address is reused
        G_READ = list(G_READ)
        assert jf(x).item() == _reads_len(x).item()
    G_READ.append(9.0)
    assert jf(x).item() == _reads_len(x).item() == 3


G_NESTED = {"items": []}
G_HOLDER = Box()
G_HOLDER.items = []


def _append_nested(x):
    G_NESTED["items"].append(x.shape[0])
    G_HOLDER.items.append(x.shape[0])
    return x * 2


def test_a_container_replaced_inside_a_global_gets_the_write():
    """The list written into is held by a global's dict or object (the probe of
    dynamo's test_exceptions style: `G["items"].append(...)`), and the caller puts
    an equal, empty list there between calls: eager appends to the new one."""
    jf = symshape.jit(_append_nested, dynamic=True)
    got, want = [], []
    for n in (3, 3, 4, 4):
        x = torch.randn(n)
        for fn, seen in ((jf, got), (_append_nested, want)):
            G_NESTED["items"], G_HOLDER.items = [], []
            torch.testing.assert_close(fn(x), x * 2)
            seen.append((list(G_NESTED["items"]), list(G_HOLDER.items)))
    assert got == want == [([n], [n]) for n in (3, 3, 4, 4)]
    jf(torch.randn(4))  # the lists kept: the writes go on into them
    jf(torch.randn(2))
    assert G_NESTED["items"] == G_HOLDER.items == [4, 4, 2]
