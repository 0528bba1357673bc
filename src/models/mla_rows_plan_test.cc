// MLA's per-token rows on the GPU runner (models/cuda/mla_rows_plan.h): every batch shape one absorbed-decode call.
#include "models/cuda/mla_rows_plan.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace attnzoo {
namespace {

TEST(MlaRowsPlan, EachNewTokenSeesTheKeysUpToItself) {
  // A fresh prefill of 3, a decode step after 10 cached, a chunk of 2 after 4 cached, an empty sequence.
  const std::vector<int32_t> cu = {0, 3, 4, 6, 6}, cache = {3, 11, 6, 5};
  const int64_t M = 2;
  const std::vector<int32_t> tables = {7, -1, 1, 2, 3, 4, 5, 6};
  const MlaRowsPlan plan = plan_mla_rows(cu, cache, tables, M);
  EXPECT_EQ(plan.max_blocks, M);
  EXPECT_EQ(plan.cache_seqlens, (std::vector<int32_t>{1, 2, 3, 11, 5, 6}));
  EXPECT_EQ(plan.block_table, (std::vector<int32_t>{7, -1, 7, -1, 7, -1, 1, 2, 3, 4, 3, 4}));
}

TEST(MlaRowsPlan, InconsistentArraysAreRefusedByName) {
  const std::vector<int32_t> tables = {0, 1};
  auto refusal = [&](std::vector<int32_t> cu, std::vector<int32_t> cache, int64_t max_blocks) -> std::string {
    try {
      plan_mla_rows(cu, cache, tables, max_blocks);
    } catch (const ArgumentError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refusal({0, 2, 3}, {2}, 2).find("cu_seqlens"), std::string::npos);
  EXPECT_NE(refusal({0, 3}, {2}, 2).find("cache_seqlens"), std::string::npos);
  EXPECT_NE(refusal({0, 1}, {1}, 3).find("block_tables"), std::string::npos);
  EXPECT_EQ(refusal({0, 2}, {5}, 2), "");
}

}  // namespace
}  // namespace attnzoo
