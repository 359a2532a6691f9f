"""Models through ``backend="inductor"`` (jit/backends/compiled.py) against eager.

The transformer block (benchmarks/workloads.py), GPT-2, BERT and ResNet
(tests/models/zoo.py: tiny configs, random weights) at six shapes, batch 1
and sequence length 1 among them (ResNet: batch 1 and a 17x21 image), within
1e-4 of eager; GPT-2 trains three SGD steps with losses, gradients and
parameters within 1e-4 of eager training of a copy. The MLP's cases are
tests/jit/test_backends.py's, which CI runs; these are slow (Inductor compiles
each shape family of each model, forward and backward, on two cores).

One compile per shape family: a family is the set of calls the compiled
code's assumptions admit (PyTorch's ShapeEnv guards, checked on every call).
Calling the six shapes again compiles nothing, and the number of compiles is
at most the number of families the six shapes fall into from a cold Inductor
cache, each named below with the decision that tells it apart. A compile error would fall back to the trace's
Python with a ``BackendWarning``: here it fails the test.
"""

from __future__ import annotations

import copy

import pytest
import torch

import symshape
from benchmarks.workloads import Block

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("error::symshape.jit.backends.compiled.BackendWarning"),
]

TEXT = [(2, 5), (3, 7), (1, 1), (4, 9), (2, 1), (1, 16)]  # (batch, length)


def through_inductor(model, calls: list[dict], traces: int, compiles: int):
    """``model`` at each call against eager; then the counts, and no compile on a
    second pass over the same shapes."""
    from tests.models.zoo import max_error

    f = symshape.jit(model, dynamic=True, backend="inductor")
    with torch.no_grad():
        for kwargs in calls:
            err = max_error(f(**kwargs), model(**kwargs))
            assert err <= 1e-4, (kwargs_shapes(kwargs), err)
        assert f.stats.compiles == traces, f.stats
        # at most the families measured from a cold Inductor cache: a warm one (an
        # earlier run) re-adds only the guards its cached graph needs, maybe fewer
        assert traces <= f.stats.backend_compiles <= compiles, f.stats
        assert len(f.traces()) == traces
        n = f.stats.backend_compiles
        for kwargs in calls:
            f(**kwargs)
    assert f.stats.backend_compiles == n  # each family compiled once
    return f


def kwargs_shapes(kwargs: dict) -> dict:
    return {k: tuple(v.shape) for k, v in kwargs.items() if isinstance(v, torch.Tensor)}


def test_block():
    torch.manual_seed(0)
    model = Block(d=32, heads=2).eval()
    g = torch.Generator().manual_seed(1)
    calls = [{"x": torch.randn(b, t, 32, generator=g)} for b, t in TEXT]
    # one trace; families (measured): sizes >= 2 with a batch of 1 among them (view
    # strides and matmul's reshapes decided size-obliviously), then each call
    # with a size of 1 compiles for that constant: (1, 1), then (2, 1), as
    # torch.compile's 0/1 specialization would; Inductor's bmm asks whether the
    # length is 1 (a layout choice), so the first family excludes it anyway
    through_inductor(model, calls, traces=1, compiles=3)


@pytest.mark.parametrize(
    "name, compiles",
    [
        # two traces (length 1: transformers' `q_len > 1` branch); in the second,
        # (1, 1) and then (2, 1) are compiled for their constant sizes, as the block's
        ("gpt2", 3),
        ("bert", 3),
        # the fake convolution picks eager's convolution backend for its output's
        # layout (`_select_conv_backend` asks whether 1 < batch < 16): a batch of 1
        # is its own family, a small image is no decision. A warm cache gives 1
        ("resnet", 2),
    ],
)
def test_transformers_model(name, compiles):
    pytest.importorskip("transformers")
    from tests.models.zoo import CASES

    case = CASES[name]
    through_inductor(case.build(), case.calls()[:6], case.traces, compiles)


def test_gpt2_trains_three_steps_like_eager():
    pytest.importorskip("transformers")
    import transformers as T

    from tests.models.zoo import VOCAB, gpt2_config

    torch.manual_seed(0)
    model = T.GPT2LMHeadModel(gpt2_config()).train()
    ref = copy.deepcopy(model)
    f = symshape.jit(model, dynamic=True, backend="inductor")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(2)
    # dropout inside Inductor's graphs draws from eager's generator only with
    # fallback_random (as torch.compile's own comparisons with eager set it)
    with torch._inductor.config.patch(fallback_random=True):
        for step, (b, t) in enumerate([(2, 5), (3, 9), (1, 4)]):
            ids = torch.randint(0, VOCAB, (b, t), generator=g)
            torch.manual_seed(10 + step)  # dropout draws the same masks in both runs
            loss = f(input_ids=ids, labels=ids).loss
            torch.manual_seed(10 + step)
            want = ref(input_ids=ids, labels=ids).loss
            loss.backward()
            want.backward()
            torch.testing.assert_close(loss, want, rtol=1e-4, atol=1e-4)
            for (name, p), q in zip(model.named_parameters(), ref.parameters()):
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=name)
            opt.step()
            opt_ref.step()
            opt.zero_grad()
            opt_ref.zero_grad()
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-4)
    assert f.traces()[-1].backward is not None
    # the forward and the backward, each in two families: a batch of 1 or more
    assert f.stats.compiles == 1 and 2 <= f.stats.backend_compiles <= 4, f.stats
