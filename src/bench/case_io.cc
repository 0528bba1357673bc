#include "bench/case_io.h"

#include <cstdio>
#include <fstream>
#include <random>

namespace attnzoo::bench {

HostArray make_array(DType t, std::vector<int64_t> shape) {
  HostArray a{t, std::move(shape), {}};
  a.bytes.assign(size_t(a.numel()) * dtype_size(t), 0);
  return a;
}

HostArray random_array(DType t, std::vector<int64_t> shape, uint32_t seed) {
  HostArray a = make_array(t, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < a.numel(); ++i) store_from_f32(a.bytes.data(), t, i, normal(rng));
  return a;
}

// numpy has no bf16 or e4m3: they travel as their raw bits ('<u2', '|u1') and the manifest names the dtype.
namespace {

const char* npy_descr(DType t) {
  switch (t) {
    case DType::f32: return "<f4";
    case DType::bf16: return "<u2";
    case DType::f16: return "<f2";
    case DType::i8: return "|i1";
    case DType::f8_e4m3: return "|u1";
    case DType::i32: return "<i4";
    case DType::i64: return "<i8";
    case DType::u8: return "|u1";  // GGUF blocks' raw bytes
    default: throw ArgumentError(std::string("write_kernel_cases: no .npy form for ") + dtype_name(t));
  }
}

}  // namespace

// The .npy format, version 1.0: magic, a little-endian header length, a Python dict literal padded with spaces
// so the data starts on a 64-byte boundary, then the C-order data.
void write_npy(const std::filesystem::path& path, const HostArray& a) {
  std::string shape = "(";
  for (size_t i = 0; i < a.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(a.shape[i]);
  shape += a.shape.size() == 1 ? ",)" : ")";
  std::string header = std::string("{'descr': '") + npy_descr(a.dtype) + "', 'fortran_order': False, 'shape': " +
                       shape + ", }";
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  const uint16_t len = uint16_t(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.put(char(len & 0xff)).put(char(len >> 8));
  f << header;
  f.write(reinterpret_cast<const char*>(a.bytes.data()), std::streamsize(a.bytes.size()));
  if (!f) throw std::runtime_error("write_kernel_cases: cannot write " + path.string());
}

Placed place(const HostArray& a, Device device) {
  Placed p{DeviceBuffer(device, a.bytes.size()), {}};
  p.buffer.upload(a.bytes.data(), a.bytes.size());
  p.view.data = p.buffer.data();
  p.view.dtype = a.dtype;
  p.view.ndim = int(a.shape.size());
  int64_t stride = 1;
  for (int d = p.view.ndim - 1; d >= 0; --d) {
    p.view.shape[d] = a.shape[size_t(d)];
    p.view.strides[d] = stride;
    stride *= a.shape[size_t(d)];
  }
  p.view.device = device;
  return p;
}

HostArray fetch(const Placed& p, const HostArray& like) {
  HostArray out = like;
  p.buffer.download(out.bytes.data(), out.bytes.size());  // waits for the stream: the bytes are final
  return out;
}

std::string list(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string number(float x) {
  char num[32];
  std::snprintf(num, sizeof num, "%.9g", double(x));
  return num;
}

std::string list(const std::vector<float>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + number(v[i]);
  return s + "]";
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out + "\"";
}

std::vector<int32_t> offsets(const std::vector<int32_t>& lens) {
  std::vector<int32_t> cu{0};
  for (int32_t l : lens) cu.push_back(cu.back() + l);
  return cu;
}

}  // namespace attnzoo::bench
