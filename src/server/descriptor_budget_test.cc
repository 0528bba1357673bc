// The descriptor plan of `attnzoo serve` (descriptor_budget.h): the soft limit raised toward the hard one, the
// connection cap lowered only where the hard limit is short, and the process's limit really raised.
#include <sys/resource.h>

#include <gtest/gtest.h>

#include <string>

#include "server/descriptor_budget.h"

namespace attnzoo::server::http {
namespace {

constexpr uint64_t kReserve = kDescriptorReserve;

TEST(DescriptorBudget, SoftLimitRaisedTowardTheHardOne) {
  // A shell's 1024 under a large hard limit: raised to what 1024 connections and 256 lingering ones need.
  const DescriptorPlan p = plan_descriptors(1024, 256, 1024, 1048576);
  EXPECT_EQ(p.soft_limit, 1024 + 256 + kReserve);
  EXPECT_EQ(p.max_connections, 1024u);
  // Already enough: left as it is, never lowered.
  const DescriptorPlan q = plan_descriptors(1024, 256, 65536, 1048576);
  EXPECT_EQ(q.soft_limit, 65536u);
  EXPECT_EQ(q.max_connections, 1024u);
  // An unlimited hard limit (UINT64_MAX) behaves as a large one.
  EXPECT_EQ(plan_descriptors(10, 256, 1024, UINT64_MAX).soft_limit, 1024u);
}

TEST(DescriptorBudget, ConnectionsLoweredWhereTheHardLimitIsShort) {
  const DescriptorPlan p = plan_descriptors(1024, 256, 1024, 1024);
  EXPECT_EQ(p.soft_limit, 1024u);
  EXPECT_EQ(p.max_connections, 1024 - 256 - kReserve);
  // A tiny limit still admits one connection (its descriptors may then run out: accept's EMFILE path).
  EXPECT_EQ(plan_descriptors(1024, 256, 100, 100).max_connections, 1u);
}

TEST(DescriptorBudget, TheProcessLimitIsRaised) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 512 + 256 + kReserve)
    GTEST_SKIP() << "hard descriptor limit " << saved.rlim_max << " is below what the check needs";
  rlimit low = saved;
  low.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::string notice;
  const size_t fit = fit_descriptor_limit(512, 256, notice);
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_EQ(fit, 512u);
  EXPECT_TRUE(notice.empty()) << notice;
  EXPECT_EQ(uint64_t(now.rlim_cur), 512 + 256 + kReserve);
}

}  // namespace
}  // namespace attnzoo::server::http
