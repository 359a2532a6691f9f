"""transformers models given attention masks with padding, through
``symshape.jit(model, dynamic=True)`` unchanged, against eager.

transformers decides in Python whether a mask has padding (``masking_utils.py``:
``torch.all(mask == 1)``, ``find_packed_sequence_indices``), a read of tensor
data, unless it sees tracing (``torch.compiler.is_compiling()``, which is True
while symshape traces: symshape/trace/compiling.py). Its tracing path always
builds the mask, which must give eager's result whether or not a row is padded:
each model gets four calls of other batch sizes and lengths, rows padded at the
end, a call with no padding at all, and one padded at the start. BigBird runs
twice: its default block-sparse attention (sequences long enough for it) and
full attention; GPT-2 without a cache twice: with a mask, and with none, where
transformers looks for packed sequences in ``position_ids``.

Tiny configs, random weights, nothing downloaded. CI runs BERT and BART (an
encoder, and an encoder-decoder with causal, padding and cross-attention masks);
the rest run with ``pytest -m slow``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch

import symshape
from tests.models.zoo import _seeded, max_error

pytest.importorskip("transformers")

VOCAB = 100
SIZE = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
    vocab_size=VOCAB, max_position_embeddings=128,
)  # fmt: skip
SEQ2SEQ = dict(
    d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
    decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=37, vocab_size=VOCAB,
    max_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2,
    decoder_start_token_id=2,
)  # fmt: skip
# (batch, length, padding of each row, padded at the start)
TEXT = [
    (2, 5, [0, 2], False),
    (3, 7, [1, 0, 3], False),
    (4, 9, [0] * 4, False),
    (2, 6, [3, 0], True),
]
# BigBird's block-sparse attention needs more than (5 + 2 * random blocks) blocks
LONG = [
    (2, 36, [0, 5], False), (3, 44, [2, 0, 9], False), (2, 40, [0, 0], False),
    (4, 52, [0, 7, 0, 1], True),
]  # fmt: skip
# (batch, height, width, padded rows and columns of each image, padded at the start)
IMAGES = [
    (2, 32, 32, [0, 8], False), (3, 40, 36, [4, 0, 12], False), (1, 48, 40, [0], False),
    (2, 64, 32, [16, 8], True),
]  # fmt: skip


def mask(b: int, t: int, pads: list[int], start: bool) -> torch.Tensor:
    m = torch.ones(b, t, dtype=torch.long)
    for i, p in enumerate(pads):
        if p:
            m[i, slice(0, p) if start else slice(t - p, t)] = 0
    return m


def text(shapes=TEXT, **extra) -> Callable[[], list[dict]]:
    def calls():
        torch.manual_seed(1)
        return [
            {"input_ids": torch.randint(3, VOCAB, (b, t)), "attention_mask": mask(b, t, p, s)}
            | extra
            for b, t, p, s in shapes
        ]

    return calls


def seq2seq() -> list[dict]:
    torch.manual_seed(1)
    calls = []
    for b, t, pads, start in TEXT:  # the decoder one token shorter, its rows padded one less
        dec = [max(p - 1, 0) for p in pads]
        calls.append({
            "input_ids": torch.randint(3, VOCAB, (b, t)),
            "attention_mask": mask(b, t, pads, start),
            "decoder_input_ids": torch.randint(3, VOCAB, (b, t - 1)),
            "decoder_attention_mask": mask(b, t - 1, dec, start),
        })  # fmt: skip
    return calls


def packed() -> list[dict]:
    """GPT-2 without a cache or a mask: transformers looks for packed sequences in
    ``position_ids`` (made by the model, or passed: rows holding several sequences)."""
    torch.manual_seed(1)
    calls = []
    for b, t, starts in [(2, 5, None), (3, 8, [[0, 3], [0], [0, 2, 6]]), (4, 7, None)]:
        kw = {"input_ids": torch.randint(3, VOCAB, (b, t)), "use_cache": False}
        if starts is not None:
            pos = torch.zeros(b, t, dtype=torch.long)
            for i, row in enumerate(starts):
                for j, s in enumerate(row):
                    end = row[j + 1] if j + 1 < len(row) else t
                    pos[i, s:end] = torch.arange(end - s)
            kw["position_ids"] = pos
        calls.append(kw)
    calls.append({**calls[1], "position_ids": torch.arange(8).repeat(3, 1)})  # none packed
    return calls


def images() -> list[dict]:
    torch.manual_seed(1)
    calls = []
    for b, h, w, pads, start in IMAGES:
        m = torch.ones(b, h, w, dtype=torch.long)
        for i, p in enumerate(pads):
            if p:
                rows, cols = (slice(0, p), slice(0, p // 2)) if start else (
                    slice(h - p, h), slice(w - p // 2, w))  # fmt: skip
                m[i, rows, :] = 0
                m[i, :, cols] = 0
        calls.append({"pixel_values": torch.randn(b, 3, h, w), "pixel_mask": m})
    return calls


def build(cls: str, config: str, **kwargs) -> Callable[[], torch.nn.Module]:
    def make():
        import transformers as T

        return _seeded(lambda: getattr(T, cls)(getattr(T, config)(**kwargs))).eval()

    return make


def detr():
    import transformers as T

    backbone = T.ResNetConfig(
        embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic",
        out_features=["stage2"],
    )  # fmt: skip
    config = T.DetrConfig(
        backbone_config=backbone, use_timm_backbone=False, d_model=32, encoder_layers=1,
        decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=37, decoder_ffn_dim=37, num_queries=5,
    )  # fmt: skip
    return _seeded(lambda: T.DetrModel(config)).eval()


@dataclass
class Case:
    build: Callable[[], torch.nn.Module]
    calls: Callable[[], list[dict]]
    traces: int = 1
    why: list[str] = field(default_factory=list)  # the reason for each trace beyond the first
    ci: bool = False


DISTILBERT = dict(
    dim=32, n_layers=2, n_heads=2, hidden_dim=37, vocab_size=VOCAB, max_position_embeddings=64
)
GPT2 = dict(n_embd=32, n_layer=2, n_head=2, vocab_size=VOCAB, n_positions=64, bos_token_id=0)
CASES = {
    "bert": Case(build("BertModel", "BertConfig", **SIZE), text(), ci=True),
    "roberta": Case(build("RobertaModel", "RobertaConfig", **SIZE, pad_token_id=1), text()),
    "distilbert": Case(build("DistilBertModel", "DistilBertConfig", **DISTILBERT), text()),
    "albert": Case(build("AlbertModel", "AlbertConfig", **SIZE, embedding_size=16), text()),
    "electra": Case(build("ElectraModel", "ElectraConfig", **SIZE, embedding_size=16), text()),
    "mpnet": Case(build("MPNetModel", "MPNetConfig", **SIZE), text()),
    "bigbird": Case(
        build("BigBirdModel", "BigBirdConfig", **SIZE, block_size=4, num_random_blocks=1),
        text(LONG),
        4,
        [
            f"{n} blocks of 4: BigBird builds its block-sparse plan in numpy, of that many blocks"
            for n in (11, 10, 13)
        ],
    ),
    "bigbird-full": Case(
        build("BigBirdModel", "BigBirdConfig", **SIZE, attention_type="original_full"), text()
    ),
    "detr": Case(detr, images),
    "bart": Case(build("BartModel", "BartConfig", **SEQ2SEQ), seq2seq, ci=True),
    "mbart": Case(build("MBartModel", "MBartConfig", **SEQ2SEQ), seq2seq),
    "pegasus": Case(build("PegasusModel", "PegasusConfig", **SEQ2SEQ), seq2seq),
    "marian": Case(build("MarianModel", "MarianConfig", **SEQ2SEQ), seq2seq),
    "gpt2": Case(build("GPT2Model", "GPT2Config", **GPT2), text(use_cache=False)),
    "gpt2-packed": Case(
        build("GPT2Model", "GPT2Config", **GPT2),
        packed,
        2,
        ["position_ids passed (a new argument): the packed rows are found from them"],
    ),
}


def shapes(kwargs: dict) -> dict:
    return {k: tuple(v.shape) for k, v in kwargs.items() if isinstance(v, torch.Tensor)}


@pytest.mark.parametrize(
    "name", [n if c.ci else pytest.param(n, marks=pytest.mark.slow) for n, c in CASES.items()]
)
def test_padded_masks_match_eager(name):
    case = CASES[name]
    model = case.build()
    jm = symshape.jit(model, dynamic=True)
    with torch.no_grad():
        for i, kwargs in enumerate(case.calls()):
            want = model(**kwargs)
            got = jm(**kwargs)
            err = max_error(got, want)
            assert err <= 1e-4, f"{name} call {i} {shapes(kwargs)}: max error {err:.2e} vs eager"
    reasons = jm.stats.recompile_reasons
    assert jm.stats.compiles == case.traces, f"{name}: {jm.stats.compiles} traces: {reasons}"
    assert len(case.why) == case.traces - 1
