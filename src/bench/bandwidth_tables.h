#pragma once
// The bandwidth tables of `attnzoo bench kernels --device cuda` as data: each names its cases, the setup that
// times one of them and its byte count, so a file of small kernels lists its tables once and the report runs and
// prints every list the same way (text under the table's title, a JSON array under its key).
#include <string>
#include <vector>

#include "bench/cuda_linear_bench.h"

namespace attnzoo::bench {

struct BandwidthTable {
  const char* key;    // the JSON array's name in the report
  const char* title;  // the text table's name; its header line adds the columns
  std::vector<LinearCase> (*cases)(Scale);
  CaseRow row;     // builds a case's inputs and times its launch
  RowBytes bytes;  // bytes read + written by one launch (the copy bandwidth's count)
  const char* counted = "read + written";  // what the GB/s column counts, in the header
};

struct BandwidthTableRows {
  const BandwidthTable* table;
  std::vector<LinearRow> rows;
};

// Every table's rows, in the tables' order.
std::vector<BandwidthTableRows> run_bandwidth_tables(const std::vector<BandwidthTable>& tables, Scale s,
                                                     Device device, Stream stream, const RowTimer& timer);
// The tables one after the other as text; as JSON members `, "<key>": [rows]` to splice into the report's object.
std::string format_bandwidth_tables_text(const std::vector<BandwidthTableRows>& tables, double copy_gbps);
std::string format_bandwidth_tables_json(const std::vector<BandwidthTableRows>& tables, double copy_gbps);
// The rows of the table named `key` (ArgumentError naming the key when there is none).
const std::vector<LinearRow>& table_rows(const std::vector<BandwidthTableRows>& tables, const std::string& key);

}  // namespace attnzoo::bench
