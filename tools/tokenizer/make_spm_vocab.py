#!/usr/bin/env python3
"""Build tests/data/tok_spm_llama.gguf: a small Llama-2-style SentencePiece vocabulary.

Llama 2 / TinyLlama vocabularies differ from Gemma's in ways the tokenizer must honour:
`add_space_prefix` is true (a space is prefixed to the text and stripped again on decode),
ids 0/1/2 are <unk>/<s>/</s>, and the 256 byte tokens follow. No such model is available
offline, so this takes the first normal tokens of the Gemma vocabulary (with their scores)
and lays them out the Llama 2 way. It also carries a `tokenizer.chat_template`.

    python3 tools/tokenizer/make_spm_vocab.py   (needs models/gemma-3-270m-q4_k_m.gguf)
"""
import pathlib

import gguf
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / "models/gemma-3-270m-q4_k_m.gguf"
OUT = ROOT / "tests/data/tok_spm_llama.gguf"
N_NORMAL = 6000

# A template in the common Hugging Face style (system folded into the first user turn,
# BOS written by the template itself), exercising loop state, slicing and string methods.
CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}"
    "{% set sys = messages[0]['content'].strip() %}{% set rest = messages[1:] %}"
    "{% else %}{% set sys = '' %}{% set rest = messages %}{% endif %}"
    "{{ bos_token }}"
    "{% for m in rest %}"
    "{% if m['role'] == 'user' %}"
    "{% if loop.first and sys %}[INST] <<SYS>>\n{{ sys }}\n<</SYS>>\n\n{{ m['content'].strip() }} [/INST]"
    "{% else %}[INST] {{ m['content'].strip() }} [/INST]{% endif %}"
    "{% elif m['role'] == 'assistant' %} {{ m['content'].strip() }} {{ eos_token }}"
    "{% else %}{{ raise_exception('unknown role ' + m['role']) }}{% endif %}"
    "{% endfor %}"
)


def main():
    r = gguf.GGUFReader(str(SRC))
    f = r.fields
    texts = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8") for i in f["tokenizer.ggml.tokens"].data]
    scores = np.array([f["tokenizer.ggml.scores"].parts[i][0] for i in f["tokenizer.ggml.scores"].data])
    types = np.array([f["tokenizer.ggml.token_type"].parts[i][0] for i in f["tokenizer.ggml.token_type"].data])

    tokens = ["<unk>", "<s>", "</s>"]
    tscores = [0.0, 0.0, 0.0]
    ttypes = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        tscores.append(0.0)
        ttypes.append(gguf.TokenType.BYTE)
    n = 0
    for i, t in enumerate(texts):
        if types[i] != 1 or t in tokens:
            continue
        tokens.append(t)
        tscores.append(float(scores[i]))
        ttypes.append(gguf.TokenType.NORMAL)
        n += 1
        if n == N_NORMAL:
            break
    # The bare space piece (far down Gemma's list) so that every space can be a token.
    if "\u2581" not in tokens:
        i = texts.index("\u2581")
        tokens.append("\u2581")
        tscores.append(float(scores[i]))
        ttypes.append(gguf.TokenType.NORMAL)
    # A user-defined token, as some Llama fine-tunes add.
    tokens.append("<|tool|>")
    tscores.append(0.0)
    ttypes.append(gguf.TokenType.USER_DEFINED)

    w = gguf.GGUFWriter(str(OUT), "llama")
    w.add_name("synthetic Llama-2-style SPM vocabulary")
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(16)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(tscores)
    w.add_token_types(ttypes)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)
    w.add_chat_template(CHAT_TEMPLATE)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {OUT.relative_to(ROOT)}: {len(tokens)} tokens, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
