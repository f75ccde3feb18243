// strata batch-merge: the shards of one batch run back into one results file, checked. Every job
// id must appear exactly once across the shard files: a missing id (a shard that did not finish),
// a duplicate (two shards ran the same job: a wrong --shard, or the same shard twice into
// different files) or an id that is not a job (results of another jobs file) is an error, and
// then nothing is written.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace strata::batch {

struct MergeStats {
  size_t jobs = 0;         // expected ids = lines written
  size_t inputs = 0;       // shard files read
  size_t torn_inputs = 0;  // shard files whose torn last line was ignored
};

// expected_ids: in the order the output should have (the jobs file's order). out_path is written
// atomically (temporary file, fsync, rename) only when every check passes.
Result<MergeStats> merge_results(const std::vector<std::string>& inputs, const std::vector<std::string>& expected_ids,
                                 const std::string& out_path);

}  // namespace strata::batch
