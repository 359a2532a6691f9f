"""transformers models (tests/models/zoo.py) through ``symshape.jit(model,
dynamic=True)``, unchanged, against eager: 10 calls of changing shape each
(4 for BLOOM, Wav2Vec2 and HuBERT), and three training steps for GPT-2 and
ResNet.

All eleven run in CI: from tiny configs they take about 12 s together on one
core, so no model needs to wait for a run by hand.
"""

import copy

import pytest
import torch

import symshape
from tests.models.zoo import CASES, max_error, train


def shapes(kwargs: dict) -> dict:
    return {k: tuple(v.shape) for k, v in kwargs.items() if isinstance(v, torch.Tensor)}


@pytest.mark.parametrize("name", list(CASES))
def test_eval_matches_eager(name):
    case = CASES[name]
    model = case.build()
    jm = symshape.jit(model, dynamic=True)
    calls = case.calls()
    with torch.no_grad():
        for i, kwargs in enumerate(calls):
            want = model(**kwargs)
            got = jm(**kwargs)
            err = max_error(got, want)
            assert err <= 1e-5, f"{name} call {i} {shapes(kwargs)}: max error {err:.2e} vs eager"
    reasons = jm.stats.recompile_reasons
    assert jm.stats.compiles == case.traces, f"{name}: {jm.stats.compiles} traces: {reasons}"
    assert jm.stats.cache_hits == len(calls) - case.traces


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.train])
def test_training_matches_eager(name):
    model, batches = CASES[name].train()
    eager = copy.deepcopy(model)
    jm = symshape.jit(model, dynamic=True)
    want = train(eager, batches)
    got = train(jm, batches)
    for i, (a, b) in enumerate(zip(got, want)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=lambda m, i=i: f"loss {i}: {m}")
    for (n, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-5, msg=lambda m, n=n: f"{n}: {m}")
    for (n, p), q in zip(model.named_buffers(), eager.buffers()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-5, msg=lambda m, n=n: f"{n}: {m}")
    assert jm.stats.compiles == CASES[name].train_traces, jm.stats.recompile_reasons
    assert jm.traces()[-1].backward is not None
