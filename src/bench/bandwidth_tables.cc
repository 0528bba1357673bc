#include "bench/bandwidth_tables.h"

#include <cstdio>

#include "core/error.h"

namespace attnzoo::bench {

std::vector<BandwidthTableRows> run_bandwidth_tables(const std::vector<BandwidthTable>& tables, Scale s,
                                                     Device device, Stream stream, const RowTimer& timer) {
  std::vector<BandwidthTableRows> out;
  for (const BandwidthTable& t : tables) out.push_back({&t, case_rows(t.cases(s), t.row, device, stream, timer)});
  return out;
}

std::string format_bandwidth_tables_text(const std::vector<BandwidthTableRows>& tables, double copy_gbps) {
  std::string s;
  char title[256];
  for (const BandwidthTableRows& t : tables) {
    std::snprintf(title, sizeof title, "%-62s median ms   GB/s %s   of copy\n", t.table->title, t.table->counted);
    s += format_bandwidth_text(title, t.rows, t.table->bytes, copy_gbps);
  }
  return s;
}

std::string format_bandwidth_tables_json(const std::vector<BandwidthTableRows>& tables, double copy_gbps) {
  std::string s;
  for (const BandwidthTableRows& t : tables)
    s += std::string(", \"") + t.table->key +
         "\": " + format_bandwidth_json(t.rows, t.table->bytes, "bytes", copy_gbps);
  return s;
}

const std::vector<LinearRow>& table_rows(const std::vector<BandwidthTableRows>& tables, const std::string& key) {
  for (const BandwidthTableRows& t : tables)
    if (key == t.table->key) return t.rows;
  throw ArgumentError("key: no bandwidth table named " + key);
}

}  // namespace attnzoo::bench
