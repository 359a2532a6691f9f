"""Mixtral and Qwen3-MoE with transformers' eager experts loop, unchanged.

``MixtralExperts.forward`` (``experts_implementation="eager"``) loops over
``expert_hit``, a tensor whose length depends on the routing, and skips the
padding expert with ``if expert_idx == self.num_experts``: Python reads the
data at each step, so the trace splits there (jit/splits/continuation.py) and a path is
traced for each routing pattern met. Four shapes against eager; calling again
with the same inputs traces nothing.
"""

import pytest
import torch

import symshape
from tests.models.zoo import _MOE, _seeded, max_error

SHAPES = [(1, 5), (2, 7), (2, 3), (3, 9)]


def _mixtral():
    import transformers as T

    config = T.MixtralConfig(**_MOE, num_local_experts=4, experts_implementation="eager")
    return _seeded(lambda: T.MixtralForCausalLM(config)).eval()


def _qwen3_moe():
    import transformers as T

    config = T.Qwen3MoeConfig(
        **_MOE, num_experts=4, moe_intermediate_size=16, head_dim=8, experts_implementation="eager"
    )
    return _seeded(lambda: T.Qwen3MoeForCausalLM(config)).eval()


@pytest.mark.parametrize(
    "build", [_mixtral, pytest.param(_qwen3_moe, marks=pytest.mark.slow)], ids=["mixtral", "qwen3"]
)
def test_eager_experts_loop_matches_eager(build):
    pytest.importorskip("transformers")
    model = build()
    assert type(model.model.layers[0].mlp.experts).__name__.endswith("Experts")
    jm = symshape.jit(model, dynamic=True)
    torch.manual_seed(0)
    calls = [torch.randint(0, 100, s) for s in SHAPES]
    with torch.no_grad():
        for ids in calls:
            err = max_error(jm(input_ids=ids), model(input_ids=ids))
            assert err <= 1e-5, f"{tuple(ids.shape)}: max error {err:.2e} vs eager"
        assert jm.stats.splits > 0
        n = jm.stats.compiles
        for ids in calls:
            jm(input_ids=ids)
    assert jm.stats.compiles == n, jm.stats.recompile_reasons[-3:]
