// The results file of a batch run: JSON lines, append-only, durable. The promises:
//   - a line is appended with one write() and then fsync'd, so once append() returns the result
//     survives a crash or power loss, and it is never rewritten;
//   - a run killed at any moment (kill -9 included) leaves at most a torn last line — the only
//     line without its '\n' — which the next open() drops (truncating the file back to the last
//     complete line) with a one-line notice, so the job it belonged to simply runs again (a last
//     line that is a whole result lacking only the '\n' is kept and given its newline);
//   - one writer at a time: open() takes an exclusive flock, so two runs cannot interleave lines.
// Lines are {"id": ..., ...}: the journal only needs the id; the runner decides the rest.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace strata::batch {

struct ResultLine {
  std::string id;
  size_t line = 0;   // 1-based
  std::string text;  // the JSON text of the line (without '\n'); only when asked to keep it
};

struct ResultsScan {
  std::vector<ResultLine> lines;  // every complete line, in file order
  uint64_t complete_bytes = 0;    // length of the prefix made of complete lines
  uint64_t torn_bytes = 0;        // bytes after the last '\n' (an interrupted append)
  // The last line lacks only its '\n' but is a whole result (an edited file, or a kill between the
  // last byte of the object and the newline — a proper prefix of a JSON object is never valid
  // JSON): it is in `lines`, counted in complete_bytes, and torn_bytes is 0.
  bool unterminated = false;
};

// Splits results text into complete lines; each must be a JSON object with a string "id", else
// the error names `name` and the line (a complete bad line is damage, not an interrupted write,
// and is not silently dropped).
Result<ResultsScan> scan_results(std::string_view text, const std::string& name, bool keep_text);

// Reads a results file without changing it (for merge). A torn last line is reported through
// `torn_bytes`; the caller decides what to say.
Result<ResultsScan> read_results_file(const std::string& path, bool keep_text);

class ResultsJournal {
 public:
  // Opens path for appending, creating it (and fsyncing its folder) when absent. An existing file
  // is scanned: a torn last line is truncated away with a notice on stderr.
  static Result<ResultsJournal> open(const std::string& path);
  ResultsJournal(ResultsJournal&& o) noexcept;
  ResultsJournal& operator=(ResultsJournal&&) = delete;
  ResultsJournal(const ResultsJournal&) = delete;
  ~ResultsJournal();

  // Ids already in the file when it was opened, plus those appended since.
  const std::set<std::string>& done() const { return done_; }
  bool has(const std::string& id) const { return done_.count(id) != 0; }
  // line: one JSON object, without '\n'. Durable when it returns ok. On a failed write (disk
  // full) the file is cut back to its previous length, so no torn line is left behind.
  Status append(const std::string& id, std::string_view line);
  const std::string& path() const { return path_; }

 private:
  ResultsJournal(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;  // bytes of complete lines in the file
  std::set<std::string> done_;
};

}  // namespace strata::batch
