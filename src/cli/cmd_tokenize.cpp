// strata tokenize -m M.gguf (-p TEXT | -f FILE) [--no-bos] [--pieces] [--no-special] [--chat]:
// prints the token ids of a text (one line, space-separated); --pieces adds one line per token
// with its decoded text. Works on vocabulary-only GGUFs.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/command.h"
#include "core/log.h"
#include "model/gguf_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string prompt;
  std::string file;
  bool no_bos = false;
  bool pieces = false;
  bool no_special = false;
  bool chat = false;
};

// Printable form of a piece: control characters and backslashes escaped.
std::string escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
    else out += char(c);
  }
  return out;
}

int run_tokenize(const TokenizeArgs& args) {
  std::string text = args.prompt;
  if (!args.file.empty()) {
    std::ifstream in(args.file, std::ios::binary);
    if (!in) {
      log::error("{}: cannot open", args.file);
      return 1;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto file = gguf::File::open(args.model, {.require_data = false});
  if (!file) {
    log::error("{}", file.message());
    return 1;
  }
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  if (!tok) {
    log::error("{}", tok.message());
    return 1;
  }
  bool parse_special = !args.no_special;
  if (args.chat) {
    const auto family = tokenizer::detect_chat_family(tok->chat_template());
    if (family == tokenizer::ChatFamily::none) {
      log::warn("{}: no known chat template (gemma, llama3, chatml); using the raw prompt", args.model);
    } else {
      log::debug("chat template: {}", tokenizer::chat_family_name(family));
      const tokenizer::ChatMessage msg{"user", text};
      text = tokenizer::apply_chat(family, std::span(&msg, 1), true);
      parse_special = true;  // the template's control tokens must be parsed
    }
  }
  const std::vector<int32_t> ids = tok->encode(text, !args.no_bos, parse_special);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::printf("%s\n", line.c_str());
  if (args.pieces) {
    for (int32_t id : ids) std::printf("%6d '%s'\n", id, escape(tok->token_to_piece(id)).c_str());
  }
  return 0;
}

}  // namespace

Command add_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* sub = app.add_subcommand("tokenize", "Print the token ids of a text (works on vocabulary-only GGUFs)");
  sub->add_option("-m,--model", args->model, "GGUF file with a tokenizer vocabulary")->required();
  auto* p = sub->add_option("-p,--prompt", args->prompt, "Text to tokenize");
  auto* f = sub->add_option("-f,--file", args->file, "Read the text from a file");
  p->excludes(f);
  sub->add_flag("--no-bos", args->no_bos, "Do not add BOS/EOS even when the vocabulary asks for them");
  sub->add_flag("--pieces", args->pieces, "Also print each token's text, one per line");
  sub->add_flag("--no-special", args->no_special,
                "Treat control tokens written in the text (<bos>, <|im_start|>) as plain text");
  sub->add_flag("--chat", args->chat,
                "Wrap the text as one user turn in the model's chat template (gemma, llama3, chatml)");
  return {sub, [args] { return run_tokenize(*args); }};
}

}  // namespace strata::cli
