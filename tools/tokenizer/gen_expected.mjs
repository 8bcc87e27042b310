// Records llama.cpp's tokenization of tests/data/tok_corpus.json, through node-llama-cpp
// 3.21.1 (its bundled llama.cpp), for the real models (Gemma 3, SmolLM2) and each synthetic
// vocabulary.
//
//   cd tools && npm ci && node tokenizer/gen_expected.mjs [name,name,...]   (default: all)
//
// node-llama-cpp's `model.tokenize(text, specialTokens)` calls llama.cpp's
// `common_tokenize(vocab, text, add_special = false, parse_special = specialTokens)`: it never
// adds BOS/EOS, and returns [] for "" without calling llama.cpp. `model.detokenize(ids,
// specialTokens)` calls `llama_detokenize(.., remove_special = false, unparse_special =
// specialTokens)`.
//
// Output per model: tests/data/tok_expected_<name>.json with, for corpus string i,
// cases[i] = [ids, ids_special, detok(ids, false), detok(ids_special, true),
//             detok(ids_special, false), detok([bos, ...ids], false)], plus the vocabulary's end-of-generation ids and the
// attribute bits of every token that is not plain NORMAL.
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath} from "node:url";
import {getLlama} from "node-llama-cpp";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const corpus = JSON.parse(fs.readFileSync(path.join(root, "tests/data/tok_corpus.json"), "utf8"));

const models = [
    ["gemma", path.join(root, "models/gemma-3-270m-q4_k_m.gguf")],
    ["smollm2", path.join(root, "models/SmolLM2-135M-Instruct.Q4_1.gguf")],
    ["spm_llama", path.join(root, "tests/data/tok_spm_llama.gguf")],
    ...["default", "gpt_2", "llama_bpe", "qwen2", "smollm"].map((p) =>
        [`bpe_${p}`, path.join(root, `tests/data/tok_bpe_${p}.gguf`)]),
];

const only = process.argv[2] ? new Set(process.argv[2].split(",")) : null;

const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
for (const [name, file] of models) {
    if (only && !only.has(name)) continue;
    if (!fs.existsSync(file)) {
        console.error(`skipping ${name}: ${file} is missing`);
        continue;
    }
    const model = await llama.loadModel({modelPath: file, vocabOnly: true});
    const cases = corpus.map((s) => {
        const ids = Array.from(model.tokenize(s, false));
        const idsSpecial = Array.from(model.tokenize(s, true));
        // With BOS in front: llama.cpp then keeps the leading space SPM would strip.
        const withBos = model.tokens.bos == null ? null : model.detokenize([model.tokens.bos, ...ids], false);
        return [ids, idsSpecial, model.detokenize(ids, false), model.detokenize(idsSpecial, true),
            model.detokenize(idsSpecial, false), withBos];
    });
    const nVocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
    const eog = [];
    const attrs = [];
    for (let id = 0; id < nVocab; id++) {
        if (model.isEogToken(id)) eog.push(id);
        const a = model._model.getTokenAttributes(id);
        if (a !== 4) attrs.push([id, a]); // 4 = LLAMA_TOKEN_ATTR_NORMAL
    }
    const out = {
        generator: "tools/tokenizer/gen_expected.mjs with node-llama-cpp 3.21.1",
        model: path.basename(file),
        n_vocab: nVocab,
        bos: model.tokens.bos,
        eos: model.tokens.eos,
        eot: model.tokens.eot,
        add_bos: model._model.shouldPrependBosToken(),
        add_eos: model._model.shouldAppendEosToken(),
        eog,
        attrs,
        cases,
    };
    const dest = path.join(root, `tests/data/tok_expected_${name}.json`);
    fs.writeFileSync(dest, JSON.stringify(out) + "\n");
    console.log(`wrote ${path.relative(root, dest)}: ${cases.length} cases, ${eog.length} eog, ${attrs.length} non-normal tokens`);
    await model.dispose();
}
await llama.dispose();
