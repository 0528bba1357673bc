#include "server/descriptor_budget.h"

#include <sys/resource.h>

#include <algorithm>

namespace attnzoo::server::http {

DescriptorPlan plan_descriptors(size_t asked, size_t lingering, uint64_t soft, uint64_t hard) {
  const uint64_t kept = uint64_t(lingering) + kDescriptorReserve;
  const uint64_t needed = uint64_t(asked) + kept;
  DescriptorPlan p;
  p.soft_limit = std::max(soft, std::min(hard, needed));
  p.max_connections =
      p.soft_limit >= needed ? asked : size_t(std::max<uint64_t>(1, p.soft_limit > kept ? p.soft_limit - kept : 0));
  return p;
}

size_t fit_descriptor_limit(size_t asked, size_t lingering, std::string& notice) {
  notice.clear();
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return asked;  // nothing known: admission's cap stands
  const uint64_t hard = lim.rlim_max == RLIM_INFINITY ? UINT64_MAX : uint64_t(lim.rlim_max);
  const uint64_t soft = lim.rlim_cur == RLIM_INFINITY ? UINT64_MAX : uint64_t(lim.rlim_cur);
  DescriptorPlan p = plan_descriptors(asked, lingering, soft, hard);
  if (p.soft_limit > soft) {
    rlimit raised = lim;
    raised.rlim_cur = rlim_t(p.soft_limit);
    if (setrlimit(RLIMIT_NOFILE, &raised) != 0) p = plan_descriptors(asked, lingering, soft, soft);
  }
  if (p.max_connections < asked)
    notice = "--max-connections " + std::to_string(asked) + " lowered to " + std::to_string(p.max_connections) +
             ": the process may open " + std::to_string(p.soft_limit) + " files (ulimit -n; " +
             std::to_string(lingering + kDescriptorReserve) + " kept for refused connections and the server's own)";
  return p.max_connections;
}

}  // namespace attnzoo::server::http
