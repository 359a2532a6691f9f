"""``output_hidden_states`` while symshape traces a transformers model and another
thread runs a model eagerly at the same time.

transformers collects hidden states through hooks that read a ContextVar, except
under compile, where it keeps the collector in one process-wide global (dynamo
cannot trace a ContextVar). symshape runs Python, so there that check keeps
eager's answer (symshape/trace/compiling.py, ``EAGER_ANSWER``): the global would
let the other thread's eager call reset the trace's collector (the trace then
returns no hidden states) or collect its own into it.
"""

import threading

import pytest
import torch

import symshape
from tests.models.zoo import _seeded, max_error

T = pytest.importorskip("transformers")

WAIT = 10.0


def bert():
    config = T.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        vocab_size=100, max_position_embeddings=64,
    )  # fmt: skip
    return _seeded(lambda: T.BertModel(config)).eval()


@pytest.mark.parametrize("other_wants_hidden_states", [False, True])
def test_hidden_states_of_a_trace_and_of_an_eager_thread(other_wants_hidden_states):
    traced, other = bert(), bert()
    torch.manual_seed(1)
    ids = torch.randint(0, 100, (2, 5))
    mask = torch.ones(2, 5, dtype=torch.long)
    mask[1, 3:] = 0
    with torch.no_grad():
        want = traced(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        want_other = other(
            input_ids=ids, attention_mask=mask, output_hidden_states=other_wants_hidden_states
        )

    inside, done = threading.Event(), threading.Event()

    def wait_for_the_other_thread(module, args):  # runs while the trace is recorded
        inside.set()
        assert done.wait(WAIT), "the eager thread did not finish in time"

    traced.encoder.layer[0].register_forward_pre_hook(wait_for_the_other_thread)
    out = {}

    def run_other():
        assert inside.wait(WAIT), "the trace did not start in time"
        with torch.no_grad():
            out["other"] = other(
                input_ids=ids, attention_mask=mask, output_hidden_states=other_wants_hidden_states
            )
        done.set()

    t = threading.Thread(target=run_other)
    t.start()
    with torch.no_grad():
        got = symshape.jit(traced, dynamic=True)(
            input_ids=ids, attention_mask=mask, output_hidden_states=True
        )
    t.join(WAIT)
    assert not t.is_alive()
    assert len(got.hidden_states) == len(want.hidden_states) == 3
    assert max_error(got, want) <= 1e-5
    assert max_error(out["other"], want_other) <= 1e-5
