// Records, for every input of inputs.json, the tokens that tiktoken's own
// WASM build gives under each encoding the Go counter knows. Run it with
// `npm ci && node gen.mjs` here; it rewrites golden.json.
import { readFileSync, writeFileSync } from "node:fs";
import { get_encoding } from "tiktoken";

const encodings = ["o200k_base", "cl100k_base"];
const inputs = JSON.parse(readFileSync(new URL("inputs.json", import.meta.url), "utf8"));
const golden = { tiktoken: "1.0.22", inputs: [] };
const encs = Object.fromEntries(encodings.map((e) => [e, get_encoding(e)]));
for (const { name, text } of inputs) {
  const row = { name, counts: {}, tokens: {} };
  for (const e of encodings) {
    // Ordinary text throughout: special-token strings count as text, as
    // a counter of conversations must.
    const ids = encs[e].encode_ordinary(text);
    row.counts[e] = ids.length;
    if (ids.length <= 64) row.tokens[e] = Array.from(ids);
  }
  golden.inputs.push(row);
}
for (const e of Object.values(encs)) e.free();
// One input a line, so that a change reads as a diff.
const lines = golden.inputs.map((row) => JSON.stringify(row)).join(",\n");
writeFileSync(new URL("golden.json", import.meta.url), `{"tiktoken": "${golden.tiktoken}", "inputs": [\n${lines}\n]}\n`);
console.log(`golden.json: ${golden.inputs.length} inputs`);
