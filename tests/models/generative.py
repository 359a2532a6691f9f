"""Tiny generative models from ``transformers`` (random weights, nothing
downloaded) and their ``generate()`` inputs, for tests/models/test_generate.py
and benchmarks/bench_generate.py.

    model = GEN["llama"].build()             # eval mode, seeded weights
    kwargs = GEN["llama"].inputs(2, 5)       # batch 2, prompt length 5
    model.generate(**kwargs, max_new_tokens=16, do_sample=False)

Every config has 2 layers, hidden size 32 to 64, a vocabulary of 128, and its
pad, bos, eos and decoder-start token ids inside the vocabulary. Prompts draw
tokens from 3..127 (never a special token), so greedy decoding never stops early
on eos and every generate() makes exactly ``max_new_tokens`` tokens. Whisper's
"prompt" is ``input_features`` [batch, num_mel_bins, 2 * max_source_positions],
whose length is fixed by the config: only its batch changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

VOCAB = 128
PAD, BOS, EOS = 0, 1, 2  # every config: pad 0, bos 1, eos 2; decoder start 1
IDS = dict(pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS)
MEL, SOURCE = 8, 16  # Whisper: 8 mel bins, 16 source positions -> 32 input frames
# larger than the configs' defaults (0.02): with default weights the tiny models emit one
# token over and over, and identical tokens would then say little
INIT, T5_INIT = 0.5, 50.0


SLIDING = (
    "a sliding window of 8: the model's own code branches on the cache's length "
    "(cumulative_length): prefill; decoding while masks can be skipped (<= 6 cached); "
    "the step that fills the window (7 cached, mask needed); decoding with a full window "
    "(the cache then holds a strided slice of the last 7 tokens)"
)


@dataclass
class GenCase:
    name: str
    build: Callable[[], torch.nn.Module]  # eval mode, seeded weights
    inputs: Callable[[int, int], dict]  # (batch, prompt length) -> generate() kwargs
    seq2seq: bool = False
    traces: int = 3  # at most this many traces over the first generate()
    why: str = ""  # why a model needs more than prefill, decoding and one spare


def _quiet() -> None:
    logging.getLogger("transformers").setLevel(logging.ERROR)


def _seeded(make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    _quiet()
    torch.manual_seed(0)
    model = make().eval()
    # no eos: every generate() makes exactly max_new_tokens tokens; a pad id: no warning
    model.generation_config.pad_token_id = PAD
    model.generation_config.eos_token_id = None
    return model


def text_inputs(batch: int, length: int, seed: int = 1) -> dict:
    g = torch.Generator().manual_seed(seed * 1000 + batch * 37 + length)
    ids = torch.randint(3, VOCAB, (batch, length), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def whisper_inputs(batch: int, length: int, seed: int = 1) -> dict:
    # `length` is ignored: Whisper's encoder takes exactly 2 * max_source_positions frames
    g = torch.Generator().manual_seed(seed * 1000 + batch * 37)
    return {"input_features": torch.randn(batch, MEL, 2 * SOURCE, generator=g)}


def gpt2(layers: int = 2, d: int = 32, heads: int = 2, positions: int = 64):
    import transformers as T

    cfg = T.GPT2Config(
        n_embd=d,
        n_layer=layers,
        n_head=heads,
        vocab_size=VOCAB,
        n_positions=positions,
        initializer_range=INIT,
        **IDS,
    )
    return _seeded(lambda: T.GPT2LMHeadModel(cfg))


def _decoder(cls_config: str, cls_model: str, **extra):
    def build():
        import transformers as T

        cfg = getattr(T, cls_config)(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=37, vocab_size=VOCAB, max_position_embeddings=64,
            initializer_range=INIT, **IDS, **extra,
        )  # fmt: skip
        return _seeded(lambda: getattr(T, cls_model)(cfg))

    return build


def t5():
    import transformers as T

    cfg = T.T5Config(
        d_model=32, d_kv=8, d_ff=37, num_layers=2, num_decoder_layers=2, num_heads=4,
        vocab_size=VOCAB, decoder_start_token_id=BOS, initializer_factor=T5_INIT, **IDS,
    )  # fmt: skip
    return _seeded(lambda: T.T5ForConditionalGeneration(cfg))


def bart():
    import transformers as T

    cfg = T.BartConfig(
        d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, vocab_size=VOCAB,
        max_position_embeddings=64, decoder_start_token_id=BOS, forced_bos_token_id=None,
        forced_eos_token_id=None, init_std=INIT, **IDS,
    )  # fmt: skip
    return _seeded(lambda: T.BartForConditionalGeneration(cfg))


def whisper():
    import transformers as T

    cfg = T.WhisperConfig(
        vocab_size=VOCAB, num_mel_bins=MEL, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=37,
        decoder_ffn_dim=37, max_source_positions=SOURCE, max_target_positions=64,
        decoder_start_token_id=BOS, begin_suppress_tokens=None, suppress_tokens=None,
        init_std=INIT, **IDS,
    )  # fmt: skip
    return _seeded(lambda: T.WhisperForConditionalGeneration(cfg))


GEN = {
    c.name: c
    for c in [
        GenCase("gpt2", gpt2, text_inputs),
        GenCase("llama", _decoder("LlamaConfig", "LlamaForCausalLM"), text_inputs),
        # a sliding window of 8 (shorter than prompt + 16 new tokens): DynamicSlidingWindowLayer,
        # whose `cumulative_length` int is state the forward updates
        # Mistral's own config: a sliding window (4096) longer than any sequence here
        GenCase("mistral", _decoder("MistralConfig", "MistralForCausalLM"), text_inputs),
        # a window of 8, shorter than prompt + 16: DynamicSlidingWindowLayer fills, and its
        # `cumulative_length` int is state the forward updates
        GenCase(
            "mistral_window8",
            _decoder("MistralConfig", "MistralForCausalLM", sliding_window=8),
            text_inputs,
            traces=4,
            why=SLIDING,
        ),
        GenCase("qwen2", _decoder("Qwen2Config", "Qwen2ForCausalLM"), text_inputs),
        GenCase("phi3", _decoder("Phi3Config", "Phi3ForCausalLM"), text_inputs),
        GenCase("gemma", _decoder("GemmaConfig", "GemmaForCausalLM", head_dim=8), text_inputs),
        GenCase("t5", t5, text_inputs, seq2seq=True),
        GenCase("bart", bart, text_inputs, seq2seq=True),
        GenCase("whisper", whisper, whisper_inputs, seq2seq=True),
    ]
}
