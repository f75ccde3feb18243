#include "model/gguf_parallel_write.h"

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

namespace strata::model {

Status write_gguf_in_pieces(gguf::Writer& w, const std::string& path, size_t n_pieces, int threads,
                            Progress& progress, const std::function<Result<uint64_t>(size_t)>& write_piece) {
  const std::string partial = path + ".partial";
  STRATA_TRY(w.begin(partial));
  std::mutex error_mu;
  Status first_error;
  std::atomic<bool> failed{false};
  tbb::task_arena arena(threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency())));
  arena.execute([&] {
    tbb::parallel_for(size_t(0), n_pieces, [&](size_t i) {
      if (failed.load(std::memory_order_relaxed)) return;
      auto done = write_piece(i);
      if (!done) {
        std::lock_guard lock(error_mu);
        if (first_error.is_ok()) first_error = done.status();
        failed = true;
        return;
      }
      progress.add(*done);
    });
  });
  progress.finish();
  Status closed = w.finish(false);
  if (first_error.is_ok() && !closed.is_ok()) first_error = closed;
  std::error_code ec;
  if (!first_error.is_ok()) {
    std::filesystem::remove(partial, ec);
    return first_error;
  }
  std::filesystem::rename(partial, path, ec);
  if (ec) return Status::error("{}: cannot rename from {}: {}", path, partial, ec.message());
  return Status::ok();
}

}  // namespace strata::model
