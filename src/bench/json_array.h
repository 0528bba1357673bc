#pragma once
// A JSON array of a bench table's rows, for the report writers (cuda_bench.cc, cuda_linear_bench.cc).
#include <string>
#include <vector>

namespace attnzoo::bench {

// "[" + object(rows[0]) + ", " + object(rows[1]) ... + "]": each row's whole object, as object(row) writes it.
template <class Row, class Object>
std::string json_array(const std::vector<Row>& rows, Object&& object) {
  std::string s = "[";
  for (size_t i = 0; i < rows.size(); ++i) s += (i ? ", " : "") + object(rows[i]);
  return s + "]";
}

}  // namespace attnzoo::bench
