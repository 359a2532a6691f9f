"""A transformers model trained under ``torch.autocast`` through ``symshape.jit``:
the loss and every parameter's gradient are eager's, bit for bit, at the traced
length and at others, with dropout on (attention's included) and with autocast
around the call or inside the function."""

import pytest
import torch

import symshape
from tests.models.zoo import _seeded, gpt2_config

T = pytest.importorskip("transformers")


def _step(fn, model, n: int, around: bool):
    torch.manual_seed(n)
    ids = torch.randint(0, model.config.vocab_size, (2, n))
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=around):
        loss = fn(ids)
    loss.backward()
    return loss, [p.grad for p in model.parameters()]


@pytest.mark.parametrize("around", [True, False], ids=["around the call", "inside"])
def test_gpt2_training_step_under_autocast_is_eagers(around):
    model = _seeded(lambda: T.GPT2LMHeadModel(gpt2_config())).train()

    def loss_of(ids):
        if around:
            return model(input_ids=ids, labels=ids).loss
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(input_ids=ids, labels=ids).loss

    jf = symshape.jit(loss_of)
    for n in (5, 9, 13):
        want_loss, want = _step(loss_of, model, n, around)
        got_loss, got = _step(jf, model, n, around)
        assert torch.equal(got_loss, want_loss)
        assert all(torch.equal(g, w) for g, w in zip(got, want))
    assert jf.stats.compiles == 2, jf.stats.recompile_reasons
    assert "bfloat16" in str(jf.traces()[-1].computation)
