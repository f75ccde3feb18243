// The tokenizer known-answer corpus: hand-picked strings plus deterministic variations.
// English, CJK, emoji, code, whitespace runs, digits, other scripts, special-token text.
"use strict";

const base = [
  // English
  "Hello world", " Hello world", "Hello World!", "Hello, world!", "hello", "HELLO", "Hello",
  "The quick brown fox jumps over the lazy dog.",
  "It's a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.",
  "I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL",
  "don't DON'T Don't won't can't shouldn't y'all o'clock rock'n'roll",
  "Mr. Smith went to Washington D.C. on Jan. 5th, 2021 at 3:30 p.m.",
  "e-mail: someone@example.com, web: https://www.example.org/path?q=1&r=two#frag",
  "A sentence with trailing space ", "  leading spaces", "tabs\tbetween\twords",
  "multi\nline\ntext\n", "Windows\r\nline\r\nendings\r\n", "semicolons; colons: dashes - and — em dashes – en dashes",
  "\"quoted\" 'single' `backtick` «guillemets» „German“ “curly” ‘quotes’",
  "Supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
  "UPPER lower MiXeD CamelCase snake_case kebab-case SCREAMING_SNAKE",
  "ied 4 ½ months", "Äpfel", "naïve café résumé coöperate façade jalapeño",
  "The year 1984 and 2001: A Space Odyssey.", "!!!!!!", "??? ... ,,, ;;; :::", "' era", " discards",
  "...", "—", "a", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\t\n", " \n ", "\u00a0non-breaking\u00a0space",
  // digits
  "3", "33", "333", "3333", "33333", "333333", "3333333", "33333333", "333333333",
  "3.14159265358979", "1,234,567.89", "+1 (555) 123-4567", "0x1F 0b1010 0o777 1e-10 6.022e23",
  "2024-01-15T13:45:30Z", "v1.2.3-beta.4", "IPv4 192.168.0.1, port 8080", "100% of 50 is 50",
  "١٢٣٤٥ ٦٧٨٩", "一二三 四五六 123 一百二十三", "½ ¾ ⅓ ² ³ ⁴ ₅ Ⅻ ⅷ",
  // CJK
  "你好，世界！", "我想在apple工作1314151天～", "今天天气很好，我们去公园散步吧。",
  "中华人民共和国成立于1949年。", "机器学习是人工智能的一个分支。", "繁體中文與簡體中文的區別",
  "こんにちは、世界！", "日本語のテキストをトークン化します。", "カタカナとひらがなと漢字",
  "東京は日本の首都です。", "안녕하세요, 세계!", "한국어 텍스트 토큰화 테스트입니다.",
  "서울특별시 강남구", "中文English混合mixed文本", "全角！＂＃＄％＆＇（）＊＋，－．／０１２",
  // emoji
  "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
  "😀😃😄😁😆😅😂🤣", "👍🏻👍🏼👍🏽👍🏾👍🏿", "👨‍👩‍👧‍👦 family", "🇺🇸🇬🇧🇯🇵🇫🇷 flags",
  "I ❤️ tokenizers 🎉🎊", "🦙 llama 🐪 camel 🐫", "⭐✨🌟💫", "Emoji at end 🔥", "🔥 at start",
  "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
  // other scripts
  "Привет, мир! Как дела?", "нещо на Български", "Ελληνικά: Γειά σου Κόσμε", "مرحبا بالعالم",
  "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "ស្វាគមន៍មកកាន់កម្ពុជា", "Cỏa Việt Nam", "Tiếng Việt có dấu",
  "Türkçe ğüşıöç İstanbul", "Polski: zażółć gęślą jaźń", "Ünïcödé ñ ø å æ ß", "ქართული ენა", "Հայերեն",
  // code
  "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
  "int main(int argc, char** argv) {\n  printf(\"%d\\n\", argc);\n  return 0;\n}",
  "for (size_t i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
  "const x = async () => { await fetch('/api/v1/items?id=42'); };",
  "{\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
  "<div class=\"container\"><p>Hello &amp; welcome</p></div>",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
  "#include <vector>\n#include <string>\n\nstd::vector<std::string> v{\"a\", \"b\"};",
  "x = [i**2 for i in range(10) if i % 2 == 0]", "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
  "$ ls -la | grep '.txt' > out.log 2>&1 && echo done", "a+=b; c-=d; e*=f; g/=h; i%=j; k<<=1; l>>=2;",
  "// comment\n/* block\n   comment */\n# python comment", "if (a && b || !c) { return a != b ? a : b; }",
  "    indented with four spaces", "\t\tindented with two tabs", "        eight spaces",
  "\n\n\n\n\n\nlots of newlines", "trailing newlines\n\n\n", "mixed \t \n \r\n whitespace",
  "    Hello\n    Hello", "\n =", " (", "w048 7tuijk dsdfhu", "ied 4 ½ months",
  // special-token text
  "<bos>", "<eos>", "<bos>Hello", "Hello<eos>", "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
  "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", "<|endoftext|>",
  "<think>\nreasoning\n</think>\n\nanswer", "<tool_call>{\"name\": \"f\"}</tool_call>", "<unk>", "<pad>",
  "text <mask> text", "<b>bold</b> <i>italic</i> <code>x</code>", "<table><tr><td>1</td></tr></table>",
  "not special: <bos > < eos> <start_of_turn", "<<bos>>", "<bos><bos>", "<|im_end|><|im_end|>",
  "\u2581already\u2581escaped",
  // not in NFC (qwen normalizes to NFC; gemma and llama 3 do not)
  "Cafe\u0301 au lait", "e\u0301e\u0300e\u0302", "\u212B\u2126 ångström ohm", "\u1100\u1161\u11A8 jamo",
  "q\u0307\u0323 reorder", "\u0958 excluded", "A\u030A\u0301 stacked", "\uFB01 ligature \u00BD",
  "▁▁ two blocks", "tab\t\t\tseparated", "<unused0> <unused99>",
];

// Deterministic variations: whitespace runs around words, digit runs, joined pairs.
function variations() {
  const out = [];
  const ws = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", " \n", "\n ", " \t ", "\r\n"];
  for (const w of ws) {
    out.push(`word${w}word`);
    out.push(`${w}word`);
    out.push(`word${w}`);
  }
  for (let n = 1; n <= 24; n += 1) out.push("7".repeat(n) + (n % 2 ? " apples" : ""));
  for (let n = 1; n <= 12; n += 1) out.push(" ".repeat(n) + "x" + " ".repeat(n));
  for (let n = 1; n <= 8; n += 1) out.push("\n".repeat(n) + "y");
  const words = ["alpha", "Beta", "gamma's", "δέλτα", "数据", "テスト", "🙂", "42", "x_y", "-->", "über"];
  const seps = [" ", ", ", "\n", "", "  ", "\t", ". ", "/"];
  let k = 0;
  for (let i = 0; i < words.length; ++i) {
    for (let j = 0; j < words.length; ++j) {
      if ((i * 7 + j * 3) % 4 !== 0) continue;
      out.push(words[i] + seps[k++ % seps.length] + words[j]);
    }
  }
  // Long inputs: a paragraph repeated, and runs that form one pre-tokenizer word.
  out.push(base[8].repeat(20));
  out.push("!".repeat(300));
  out.push("数据".repeat(200));
  out.push(" ".repeat(200) + "end");
  out.push("ab".repeat(150));
  for (const t of ["Hello", "你好", "🙂", "42", "<bos>", "<|im_start|>"]) {
    out.push(`${t} ${t}  ${t}\n${t}\t${t}`);
  }
  // Case variants of the English sentences (contractions and word splits change with case).
  for (const t of base.slice(7, 22)) {
    out.push(t.toUpperCase());
    out.push(t.toLowerCase());
  }
  return out;
}

module.exports = { corpus: () => [...base, ...variations()] };
