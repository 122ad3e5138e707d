// GoogleTest's sharding protocol for `report` and `validate`, and `report --merge`.
#pragma once

#include <string>
#include <vector>

namespace ropecheck::cli {

struct Shard {
  int index = 0, total = 1;
};

// `--shard i/n` when given (it wins), else GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX (both or
// neither, as gtest requires), else 0/1. Throws UsageError on malformed or inconsistent values.
Shard resolve_shard(const std::string& flag);

// gtest's handshake: a runner that sets GTEST_SHARD_STATUS_FILE learns that the program honours
// sharding from the file's existence. Creates (touches) it when the variable is set.
void touch_shard_status_file();

// `report --merge a.json b.json ... --out DIR [--baseline B]`: merges shard reports, writes the
// report set, prints the failed checks and returns `report`'s exit status (0/1; bad input ->
// UsageError).
int merge_reports(const std::vector<std::string>& files, const std::string& out,
                  const std::string& baseline, double baseline_factor);

}  // namespace ropecheck::cli
