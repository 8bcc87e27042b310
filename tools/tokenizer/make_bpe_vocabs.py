#!/usr/bin/env python3
"""Build small synthetic byte-level BPE vocabularies as GGUF files (tests/data/tok_bpe_*.gguf).

No real BPE model is available offline, so a ByteLevel BPE is trained with the PyPI
`tokenizers` package on a licence text shipped with Debian plus the multilingual test corpus
(so that merges also join the bytes of non-Latin characters), then written to GGUF with gguf-py:
one file per pre-tokenizer (`tokenizer.ggml.pre`) we support. Each file is vocabulary-only
(llama.cpp loads it with `vocab_only`), with a few control and user-defined tokens.

    pip install tokenizers==0.23.3 gguf==0.19.0
    python3 tools/tokenizer/make_bpe_vocabs.py
"""
import pathlib

import gguf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data"
TRAIN_TEXT = pathlib.Path("/usr/share/common-licenses/GPL-3")
N_MERGES = 2000

# Control tokens (need special parsing) and user-defined ones (always matched).
CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|eot_id|>",
           "<|start_header_id|>", "<|end_header_id|>"]
USER_DEFINED = ["<tool_call>", "</tool_call>", "[INST]"]

# pre name -> (add_bos, bos token text)
VARIANTS = {
    "default": (False, "<|endoftext|>"),
    "gpt-2": (False, "<|endoftext|>"),
    "llama-bpe": (True, "<|begin_of_text|>"),
    "qwen2": (False, "<|endoftext|>"),
    "smollm": (False, "<|endoftext|>"),
}


def train():
    import json, tempfile
    corpus = json.loads((OUT / "tok_corpus.json").read_text())
    extra = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8")
    extra.write("\n".join(corpus))
    extra.close()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=256 + N_MERGES,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
        special_tokens=[],
    )
    tok.train([str(TRAIN_TEXT), extra.name], trainer)
    pathlib.Path(extra.name).unlink()
    state = json.loads(tok.to_str())["model"]
    vocab = state["vocab"]  # text -> id
    merges = state["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    return tokens, merges


def write(pre, tokens, merges):
    add_bos, bos_text = VARIANTS[pre]
    all_tokens = tokens + CONTROL + USER_DEFINED
    types = ([gguf.TokenType.NORMAL] * len(tokens) + [gguf.TokenType.CONTROL] * len(CONTROL)
             + [gguf.TokenType.USER_DEFINED] * len(USER_DEFINED))
    path = OUT / f"tok_bpe_{pre.replace('-', '_')}.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"synthetic BPE vocabulary ({pre})")
    # Hyper-parameters llama.cpp reads even for a vocabulary-only load.
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(16)
    w.add_vocab_size(len(all_tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(all_tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(all_tokens.index(bos_text))
    w.add_eos_token_id(all_tokens.index("<|endoftext|>"))
    w.add_add_bos_token(add_bos)
    w.add_add_eos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {path.relative_to(ROOT)}: {len(all_tokens)} tokens, {len(merges)} merges, "
          f"{path.stat().st_size} bytes")


def main():
    tokens, merges = train()
    for pre in VARIANTS:
        write(pre, tokens, merges)


if __name__ == "__main__":
    main()
