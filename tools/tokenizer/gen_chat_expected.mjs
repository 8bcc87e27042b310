// Renders the chat templates and conversations of tests/data/tok_chat_cases.json with
// llama.cpp's own Jinja engine (node-llama-cpp 3.21.1's native AddonJinjaRenderer) and writes
// tests/data/tok_chat_expected.json: for each template, conversation and add_generation_prompt,
// the exact output, or null when llama.cpp raises an error.
//
//   cd tools && node tokenizer/gen_chat_expected.mjs
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath} from "node:url";
import {getLlama} from "node-llama-cpp";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const {templates, conversations} = JSON.parse(fs.readFileSync(path.join(root, "tests/data/tok_chat_cases.json"), "utf8"));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const Renderer = llama._bindings.AddonJinjaRenderer;
const results = [];
for (const [name, source] of Object.entries(templates)) {
    const renderer = new Renderer(source);
    for (let c = 0; c < conversations.length; c++) {
        for (const addGenerationPrompt of [false, true]) {
            let output = null;
            try {
                output = renderer.render({
                    messages: conversations[c],
                    bos_token: "<BOS>",
                    eos_token: "<EOS>",
                    add_generation_prompt: addGenerationPrompt,
                });
            } catch (e) {
                output = null;
            }
            results.push({template: name, conversation: c, add_generation_prompt: addGenerationPrompt, output});
        }
    }
}
const dest = path.join(root, "tests/data/tok_chat_expected.json");
fs.writeFileSync(dest, JSON.stringify({generator: "tools/tokenizer/gen_chat_expected.mjs with node-llama-cpp 3.21.1", results}, null, 1) + "\n");
console.log(`wrote ${path.relative(root, dest)}: ${results.length} renders, ${results.filter((r) => r.output === null).length} errors`);
await llama.dispose();
