"""Real models from ``transformers``, built from tiny configs with random weights
(nothing is downloaded), and the inputs each is called with.

    case = CASES["gpt2"]
    model = case.build()            # eval mode, seeded weights
    for kwargs in case.calls():     # 10 calls of changing shape (4 for the newer cases)
        model(**kwargs)

Text models change batch and sequence length (T5: encoder and decoder lengths
separately), length 1 included (BLOOM, Mixtral and Qwen3-MoE: the first 4 of
those shapes); Wav2Vec2 and HuBERT change batch and audio length (4 calls);
ResNet and ConvNeXt change
batch and image size; ViT changes image size through
``interpolate_pos_encoding=True``; Swin changes batch and image size among
sizes it takes without padding.

Each case also says how many traces its calls need and why, in words: a
trace beyond the first exists only where the model's own code branches on a
size. ``tests/models/test_transformers.py`` checks the count, the outputs against
eager, and (GPT-2, ResNet) three training steps; ``benchmarks/models.py`` times
them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

TEXT = [(2, 5), (3, 7), (1, 1), (4, 9), (2, 1), (1, 16), (3, 3), (5, 2), (2, 11), (1, 8)]
SEQ2SEQ = [
    (2, 5, 3), (3, 7, 1), (1, 1, 4), (4, 9, 9), (2, 1, 1),
    (1, 16, 2), (3, 3, 6), (5, 2, 7), (2, 11, 5), (1, 8, 3),
]  # fmt: skip
IMAGES = [
    (2, 32, 32), (3, 40, 36), (1, 33, 47), (4, 64, 64), (2, 17, 21),
    (1, 24, 56), (3, 48, 32), (5, 29, 29), (2, 36, 44), (1, 64, 40),
]  # fmt: skip
VIT_IMAGES = [
    (2, 32, 32), (3, 40, 48), (1, 16, 24), (4, 64, 32), (2, 8, 8),
    (1, 24, 24), (3, 32, 48), (5, 40, 40), (2, 56, 16), (1, 32, 32),
]  # fmt: skip
SWIN_IMAGES = [
    (2, 32, 32), (3, 32, 64), (1, 64, 32), (4, 32, 32), (2, 64, 32),
    (1, 32, 32), (3, 32, 64), (5, 32, 32), (2, 32, 64), (1, 64, 32),
]  # fmt: skip
AUDIO = [(2, 400), (3, 561), (1, 160), (4, 1000)]  # (batch, samples)
VOCAB = 100
LENGTH_ONE = "sequence length 1: transformers' sdpa_attention_forward branches on `q_len > 1`"


@dataclass
class Case:
    name: str
    build: Callable[[], torch.nn.Module]  # the model in eval mode
    calls: Callable[[], list[dict]]  # keyword arguments of the calls (10, or 4)
    traces: int  # how many traces the calls need
    why: list[str] = field(default_factory=list)  # the reason for each trace beyond the first
    train: Callable[[], tuple[torch.nn.Module, list[dict]]] | None = None  # model, 3 batches
    train_traces: int = 1  # traces of the 3 training steps


def _quiet() -> None:
    # tiny configs trip transformers' config sanity warnings (token ids, loss type)
    logging.getLogger("transformers").setLevel(logging.ERROR)


def _seeded(make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    _quiet()
    torch.manual_seed(0)
    return make()


def _ids(shape) -> torch.Tensor:
    return torch.randint(0, VOCAB, shape)


def _text_calls(
    extra: Callable[[tuple], dict] = lambda s: {}, sizes=TEXT
) -> Callable[[], list[dict]]:
    def calls():
        torch.manual_seed(1)
        return [{"input_ids": _ids(s), **extra(s)} for s in sizes]

    return calls


def _images(sizes, **extra) -> Callable[[], list[dict]]:
    def calls():
        torch.manual_seed(1)
        return [{"pixel_values": torch.randn(b, 3, h, w), **extra} for b, h, w in sizes]

    return calls


# -- text -------------------------------------------------------------------------------------


def gpt2_config():
    import transformers as T

    return T.GPT2Config(
        n_embd=32, n_layer=2, n_head=2, vocab_size=VOCAB, n_positions=64, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip


def gpt2():
    import transformers as T

    return _seeded(lambda: T.GPT2Model(gpt2_config())).eval()


def gpt2_train():
    import transformers as T

    model = _seeded(lambda: T.GPT2LMHeadModel(gpt2_config())).train()
    torch.manual_seed(2)
    batches = []
    for b, t in [(2, 5), (3, 9), (1, 4)]:
        ids = _ids((b, t))
        batches.append({"input_ids": ids, "labels": ids})
    return model, batches


def bert():
    import transformers as T

    config = T.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        vocab_size=VOCAB, max_position_embeddings=64,
    )  # fmt: skip
    return _seeded(lambda: T.BertModel(config)).eval()


def llama():
    import transformers as T

    config = T.LlamaConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=37, vocab_size=VOCAB, max_position_embeddings=64, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    return _seeded(lambda: T.LlamaModel(config)).eval()


def bloom():
    import transformers as T

    config = T.BloomConfig(hidden_size=32, n_layer=2, n_head=2, vocab_size=VOCAB)
    return _seeded(lambda: T.BloomModel(config)).eval()


# Mixture-of-experts: transformers' default experts ("grouped_mm") call `torch._grouped_mm`
# (symshape/ops/grouped_mm.py). In bfloat16: under symshape.jit `torch.compiler.is_compiling()`
# answers True, and transformers then routes any other dtype to its own custom op
# `torch.ops.transformers.grouped_mm_fallback` (integrations/moe.py: _can_use_grouped_mm),
# which has no rule; eager on CPU takes `torch._grouped_mm` for every dtype.
_MOE = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64, num_experts_per_tok=2,
)  # fmt: skip


def mixtral():
    import transformers as T

    config = T.MixtralConfig(**_MOE, num_local_experts=4)
    return _seeded(lambda: T.MixtralForCausalLM(config)).eval().to(torch.bfloat16)


def qwen3_moe():
    import transformers as T

    config = T.Qwen3MoeConfig(**_MOE, num_experts=4, moe_intermediate_size=16, head_dim=8)
    return _seeded(lambda: T.Qwen3MoeForCausalLM(config)).eval().to(torch.bfloat16)


def t5():
    import transformers as T

    config = T.T5Config(
        d_model=32, d_kv=8, d_ff=37, num_layers=2, num_decoder_layers=2, num_heads=4,
        vocab_size=VOCAB, decoder_start_token_id=0,
    )  # fmt: skip
    return _seeded(lambda: T.T5Model(config)).eval()


def t5_calls():
    torch.manual_seed(1)
    return [{"input_ids": _ids((b, n)), "decoder_input_ids": _ids((b, m))} for b, n, m in SEQ2SEQ]


# -- audio ------------------------------------------------------------------------------------


def _audio_config(make):
    # a 2-layer feature extractor (stride 10) and a 16-tap grouped positional convolution,
    # whose weight is nn.utils.parametrizations.weight_norm's (torch._weight_norm)
    return make(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
    )  # fmt: skip


def wav2vec2():
    import transformers as T

    return _seeded(lambda: T.Wav2Vec2Model(_audio_config(T.Wav2Vec2Config))).eval()


def hubert():
    import transformers as T

    return _seeded(lambda: T.HubertModel(_audio_config(T.HubertConfig))).eval()


def _audio_calls():
    torch.manual_seed(1)
    return [{"input_values": torch.randn(b, n)} for b, n in AUDIO]


# -- vision -----------------------------------------------------------------------------------


def resnet_config():
    import transformers as T

    return T.ResNetConfig(
        embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", num_labels=5
    )


def resnet():
    import transformers as T

    return _seeded(lambda: T.ResNetModel(resnet_config())).eval()


def resnet_train():
    import transformers as T

    model = _seeded(lambda: T.ResNetForImageClassification(resnet_config())).train()
    torch.manual_seed(2)
    batches = [
        {"pixel_values": torch.randn(b, 3, h, w), "labels": torch.randint(0, 5, (b,))}
        for b, h, w in [(2, 32, 32), (3, 40, 36), (4, 33, 47)]
    ]
    return model, batches


def convnext():
    import transformers as T

    config = T.ConvNextConfig(hidden_sizes=[8, 16], depths=[1, 1], num_stages=2)
    return _seeded(lambda: T.ConvNextModel(config)).eval()


def vit():
    import transformers as T

    config = T.ViTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        image_size=32, patch_size=8,
    )  # fmt: skip
    return _seeded(lambda: T.ViTModel(config)).eval()


def swin():
    import transformers as T

    config = T.SwinConfig(
        image_size=32, patch_size=4, embed_dim=8, depths=[1, 1], num_heads=[1, 2], window_size=4
    )
    return _seeded(lambda: T.SwinModel(config)).eval()


CASES = {
    c.name: c
    for c in [
        Case("gpt2", gpt2, _text_calls(), 2, [LENGTH_ONE], train=gpt2_train),
        Case("bert", bert, _text_calls(), 2, [LENGTH_ONE]),
        Case("llama", llama, _text_calls(), 2, [LENGTH_ONE]),
        # BLOOM's own attention (baddbmm with ALiBi) has no `q_len > 1` branch
        Case("bloom", bloom, _text_calls(sizes=TEXT[:4]), 1),
        Case("mixtral", mixtral, _text_calls(sizes=TEXT[:4]), 2, [LENGTH_ONE]),
        Case("qwen3_moe", qwen3_moe, _text_calls(sizes=TEXT[:4]), 2, [LENGTH_ONE]),
        Case(
            "t5",
            t5,
            t5_calls,
            4,
            [f"decoder {LENGTH_ONE}", f"encoder {LENGTH_ONE}", "both lengths 1"],
        ),
        Case("wav2vec2", wav2vec2, _audio_calls, 1),
        Case("hubert", hubert, _audio_calls, 1),
        # training: the first forward writes `self.config.problem_type` (None before), and a
        # trace that read None is not valid for the value it wrote: a second trace
        Case("resnet", resnet, _images(IMAGES), 1, train=resnet_train, train_traces=2),
        Case("convnext", convnext, _images(IMAGES), 1),
        Case(
            "vit",
            vit,
            _images(VIT_IMAGES, interpolate_pos_encoding=True),
            2,
            [
                "images other than 32x32: ViTEmbeddings.interpolate_pos_encoding returns the "
                "position embeddings unchanged when `num_patches == num_positions and "
                "height == width`"
            ],
        ),
        Case(
            "swin",
            swin,
            _images(SWIN_IMAGES),
            2,
            [
                "64x32 images: SwinLayer.set_shift_and_window_size takes Python's min() of the "
                "stage resolutions (a comparison of two sizes) and compares it with window_size"
            ],
        ),
    ]
}


def tensors(x, seen=None) -> list[torch.Tensor]:
    """Every tensor in a model's output, caches included, in a fixed order."""
    seen = set() if seen is None else seen
    if isinstance(x, torch.Tensor):
        return [x]
    if id(x) in seen or x is None or isinstance(x, (int, float, bool, str, torch.device)):
        return []
    seen.add(id(x))
    if isinstance(x, dict):  # ModelOutput too
        return [t for k in x for t in tensors(x[k], seen)]
    if isinstance(x, (tuple, list)):
        return [t for y in x for t in tensors(y, seen)]
    if hasattr(x, "__dict__"):  # a Cache and its layers
        return [t for k, v in sorted(vars(x).items()) for t in tensors(v, seen)]
    return []


def max_error(got, want) -> float:
    """Largest absolute difference between two outputs of the same structure."""
    g, w = tensors(got), tensors(want)
    if len(g) != len(w):
        raise AssertionError(f"{len(g)} output tensors, eager has {len(w)}")
    err = 0.0
    for a, b in zip(g, w):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise AssertionError(
                f"output {tuple(a.shape)} {a.dtype} != eager {tuple(b.shape)} {b.dtype}"
            )
        if a.numel():
            err = max(err, (a.double() - b.double()).abs().max().item())
    return err


def train(model, batches, lr: float = 0.1) -> list[torch.Tensor]:
    """SGD steps on ``batches`` (the model returns ``.loss``); the detached losses."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for i, kwargs in enumerate(batches):
        torch.manual_seed(10 + i)  # dropout draws the same masks in both runs
        opt.zero_grad()
        loss = model(**kwargs).loss
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses
