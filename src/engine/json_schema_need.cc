#include "engine/json_schema_need.h"

#include <algorithm>
#include <bit>
#include <vector>

namespace attnzoo {

namespace {
using Kind = JsonSchema::Kind;
constexpr uint16_t kInfinite = 0xFFFF;
}  // namespace

void compute_nesting_need(JsonSchema& g) {
  auto& nn = g.node_need;
  auto& pn = g.position_need;
  nn.assign(g.nodes.size(), kInfinite);
  pn.assign(g.positions.size(), kInfinite);
  const auto plus_one = [](uint16_t v) { return v == kInfinite ? kInfinite : uint16_t(v + 1); };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < nn.size(); ++i) {
      const auto& n = g.nodes[i];
      uint16_t v = 0;
      // Unlisted keys' values: the deepest of the schemas they may take, as the recognizer reads them (none: no
      // such key, so none makes up minProperties).
      const auto positions = g.other_key_positions(n);
      uint16_t other = positions.empty() ? kInfinite : 0;
      for (uint16_t q : positions) other = std::max(other, pn[q]);
      if (n.kind == Kind::map) v = plus_one(n.min > 0 ? other : 0);
      if (n.kind == Kind::array) {
        uint16_t deepest = 0;  // over the items minItems requires: the tuple's own, then `items`
        for (uint32_t k = 0; k < n.min && k <= n.num_properties; ++k)
          deepest = std::max(deepest, k < n.num_properties ? pn[g.properties[n.first_property + k].value]
                                                           : pn[n.child]);
        v = plus_one(deepest);
      }
      if (n.kind == Kind::object) {
        uint16_t deepest = 0;
        std::vector<uint16_t> optional;  // minProperties past the required keys takes the shallowest others
        for (uint32_t k = 0; k < n.num_properties; ++k) {
          const uint16_t need = pn[g.properties[n.first_property + k].value];
          if ((n.required >> k) & 1) deepest = std::max(deepest, need);
          else optional.push_back(need);
        }
        const uint32_t more = n.min - std::min<uint32_t>(n.min, uint32_t(std::popcount(n.required)));
        if (more > 0) {
          if (other != kInfinite) optional.insert(optional.end(), more, other);  // other keys, any number
          std::sort(optional.begin(), optional.end());
          deepest = std::max(deepest, more <= optional.size() ? optional[more - 1] : kInfinite);
        }
        v = plus_one(deepest);
      }
      if (v < nn[i]) nn[i] = v, changed = true;
    }
    for (size_t p = 0; p < pn.size(); ++p)
      for (uint16_t b : g.positions[p].branches)
        if (nn[b] < pn[p]) pn[p] = nn[b], changed = true;
  }
}

}  // namespace attnzoo
