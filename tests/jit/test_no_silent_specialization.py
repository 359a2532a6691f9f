"""No silent specialization: programs that turn sizes into Python values.

Each program is traced at one shape and then run at other shapes. Every run
must equal eager; where the program's behaviour depends on the concrete size,
a recompile with a reason is fine, a wrong result never is.
"""

import math

import pytest
import torch
from harness import assert_same

import symshape


def as_int(x):
    return x * int(x.shape[0])


def as_index(x):
    return x[: x.shape[0] // 2] + 1


def as_range(x):
    acc = x[0] * 0
    for i in range(x.shape[0]):
        acc = acc + x[i]
    return acc


def as_view_args(x):
    n, m = x.shape
    return x.reshape(n * m).view(m, n).sum(0)


def as_factory_size(x):
    return torch.zeros(x.shape[0], 2) + x.shape[1]


def as_arange(x):
    return torch.arange(x.shape[0]) * x.shape[1]


def as_size_compare(x):
    if x.shape == torch.Size([4, 3]):
        return x * 10
    return x


def as_size_tuple_compare(x):
    if tuple(x.shape) == (4, 3):
        return x * 10
    return x


def as_len(x):
    return x * len(x)


def as_math(x):
    return x * math.ceil(x.shape[0] / 3) + math.floor(x.shape[1] / 2)


def as_float(x):
    return x / float(x.shape[0])


def as_bool_branch(x):
    if x.shape[0] % 2:
        return x.flip(0)
    return x


def as_list_len(x):
    return torch.stack([x[i] for i in range(len(x))]).sum(0)


def as_python_max(x):
    k = max(x.shape[0], 3)
    return torch.ones(k) * x.shape[1]


def as_numel(x):
    return x.reshape(-1)[: x.numel() // 2]


def as_dict_key(x):
    table = {4: 1.0, 5: 2.0}
    return x * table.get(x.shape[0], 3.0)


def as_shape_in_output(x):
    return x.shape[0] * x.shape[1], x.size(-1) - 1


def as_string(x):
    return x * len(str(x.shape[0]))


def as_slice_negative(x):
    return x[-x.shape[0] + 1 :]


def as_chunk_count(x):
    return torch.cat([c * i for i, c in enumerate(x.chunk(2))])


PROGRAMS = [
    as_int, as_index, as_range, as_view_args, as_factory_size, as_arange, as_size_compare,
    as_size_tuple_compare, as_len, as_math, as_float, as_bool_branch, as_list_len,
    as_python_max, as_numel, as_dict_key, as_shape_in_output, as_string, as_slice_negative,
    as_chunk_count,
]  # fmt: skip


@pytest.mark.parametrize("dynamic", [True, None])
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda f: f.__name__)
def test_sizes_turned_into_python_values(prog, dynamic):
    g = symshape.jit(prog, dynamic=dynamic)
    shapes = [(4, 3), (5, 3), (4, 2), (1, 3), (7, 5), (4, 3), (2, 1), (10, 3)]
    for shape in shapes:
        x = torch.randn(shape)
        assert_same(g(x), prog(x), where=f"{prog.__name__}{shape}")
    # every recompile says why
    assert len(g.stats.recompile_reasons) == g.stats.compiles - 1
    assert all(isinstance(r, str) and r for r in g.stats.recompile_reasons)


@pytest.mark.parametrize(
    "op",
    [lambda a, b: a + b, lambda a, b: a.expand(b.shape[0], a.shape[1]) * 1],
    ids=["broadcast", "expand"],
)
def test_a_size_error_the_code_catches_is_a_guarded_decision(op):
    # the error is part of the program's behaviour: a trace that took the except
    # branch must not serve inputs for which the op succeeds
    def fn(x, y):
        try:
            return op(x, y) * 2
        except RuntimeError:
            return x - 1

    f = symshape.jit(fn, dynamic=True)
    for (n, k), m in [((5, 2), 3), ((3, 2), 1), ((4, 2), 4), ((6, 2), 7), ((1, 2), 5)]:
        x, y = torch.randn(n, k), torch.randn(m, k)
        torch.testing.assert_close(f(x, y), fn(x, y))
