#include "loader/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "loader/json.h"

namespace attnzoo {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

struct DTypeEntry {
  FileDType type;
  const char* name;
  size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {FileDType::BOOL, "BOOL", 1},       {FileDType::U8, "U8", 1},           {FileDType::I8, "I8", 1},
    {FileDType::I16, "I16", 2},         {FileDType::U16, "U16", 2},         {FileDType::I32, "I32", 4},
    {FileDType::U32, "U32", 4},         {FileDType::I64, "I64", 8},         {FileDType::U64, "U64", 8},
    {FileDType::F8_E4M3, "F8_E4M3", 1}, {FileDType::F8_E5M2, "F8_E5M2", 1}, {FileDType::F16, "F16", 2},
    {FileDType::BF16, "BF16", 2},       {FileDType::F32, "F32", 4},         {FileDType::F64, "F64", 8},
};

const DTypeEntry& entry(FileDType t) {
  for (const auto& e : kDTypes)
    if (e.type == t) return e;
  return kDTypes[0];
}

struct Context {
  const std::string& path;
  [[noreturn]] void fail(const std::string& message) const { throw LoadError(path + ": " + message); }
  [[noreturn]] void fail_tensor(const std::string& name, const std::string& message) const {
    throw LoadError(path + ": tensor '" + name + "': " + message);
  }
};

TensorInfo parse_entry(const Context& ctx, const std::string& name, const json::Value& v, uint64_t data_size) {
  if (!v.is_object()) ctx.fail_tensor(name, std::string("header entry is a JSON ") + json::kind_name(v.kind()) + ", expected an object");
  TensorInfo t;
  t.name = name;

  const json::Value* dtype = v.find("dtype");
  if (!dtype || !dtype->is_string()) ctx.fail_tensor(name, "missing or non-string \"dtype\"");
  bool known = false;
  for (const auto& e : kDTypes) {
    if (dtype->as_string() == e.name) {
      t.dtype = e.type;
      known = true;
    }
  }
  if (!known) ctx.fail_tensor(name, "unknown dtype \"" + dtype->as_string() + "\"");

  const json::Value* shape = v.find("shape");
  if (!shape || !shape->is_array()) ctx.fail_tensor(name, "missing or non-array \"shape\"");
  uint64_t numel = 1;
  for (const json::Value& d : shape->as_array()) {
    if (!d.is_integer() || d.as_int() < 0) ctx.fail_tensor(name, "shape entries must be non-negative integers");
    t.shape.push_back(d.as_int());
    if (__builtin_mul_overflow(numel, uint64_t(d.as_int()), &numel) || numel > uint64_t(INT64_MAX)) {
      ctx.fail_tensor(name, "shape has more elements than fit in 64 bits");
    }
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, uint64_t(entry(t.dtype).size), &nbytes)) {
    ctx.fail_tensor(name, "byte size overflows 64 bits");
  }

  const json::Value* offsets = v.find("data_offsets");
  if (!offsets || !offsets->is_array() || offsets->as_array().size() != 2) {
    ctx.fail_tensor(name, "\"data_offsets\" must be an array [begin, end]");
  }
  for (const json::Value& o : offsets->as_array()) {
    if (!o.is_integer() || o.as_int() < 0) ctx.fail_tensor(name, "data_offsets must be non-negative integers");
  }
  t.begin = uint64_t(offsets->as_array()[0].as_int());
  t.end = uint64_t(offsets->as_array()[1].as_int());
  auto range = [&] {  // appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "[" + std::to_string(...)
    std::string r("[");
    r += std::to_string(t.begin);
    r += ", ";
    r += std::to_string(t.end);
    r += "]";
    return r;
  };
  if (t.end < t.begin) ctx.fail_tensor(name, "data_offsets " + range() + " end before begin");
  if (t.end > data_size) {
    ctx.fail_tensor(name, "data_offsets " + range() + " run past the data section (" + std::to_string(data_size) +
                              " bytes; file truncated?)");
  }
  if (t.end - t.begin != nbytes) {
    ctx.fail_tensor(name, "data_offsets " + range() + " hold " + std::to_string(t.end - t.begin) +
                              " bytes, but shape and dtype " + entry(t.dtype).name + " need " + std::to_string(nbytes));
  }
  return t;
}

}  // namespace

size_t file_dtype_size(FileDType t) { return entry(t).size; }
const char* file_dtype_name(FileDType t) { return entry(t).name; }

bool to_dtype(FileDType t, DType* out) {
  switch (t) {
    case FileDType::F32: *out = DType::f32; return true;
    case FileDType::BF16: *out = DType::bf16; return true;
    case FileDType::F16: *out = DType::f16; return true;
    case FileDType::I32: *out = DType::i32; return true;
    case FileDType::I64: *out = DType::i64; return true;
    case FileDType::U8: *out = DType::u8; return true;
    default: return false;
  }
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // checked against overflow when the header was read
  return n;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) { return parse(MappedFile::open(path)); }

SafetensorsFile SafetensorsFile::parse(std::shared_ptr<const MappedFile> bytes) {
  const Context ctx{bytes->path()};
  const size_t size = bytes->size();
  if (size < 8) {
    ctx.fail("file is " + std::to_string(size) + " bytes, too short for the 8-byte header length (truncated?)");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes->data(), 8);
  if (header_len > kMaxHeaderBytes) {
    ctx.fail("header length " + std::to_string(header_len) + " is over the " + std::to_string(kMaxHeaderBytes) +
             "-byte limit (corrupt, or not a safetensors file)");
  }
  if (header_len > size - 8) {
    ctx.fail("header length " + std::to_string(header_len) + " runs past the end of the " + std::to_string(size) +
             "-byte file (truncated?)");
  }
  json::Value header;
  try {
    header = json::parse(std::string_view(reinterpret_cast<const char*>(bytes->data()) + 8, header_len));
  } catch (const json::ParseError& e) {
    // The offset is reported relative to the file, which is what a hex dump shows.
    ctx.fail("header: invalid JSON at file byte " + std::to_string(e.offset + 8) + ": " + e.detail);
  }
  if (!header.is_object()) ctx.fail(std::string("header is a JSON ") + json::kind_name(header.kind()) + ", expected an object");

  SafetensorsFile f;
  const uint64_t data_size = size - 8 - header_len;
  f.data_section_ = bytes->data() + 8 + header_len;
  for (const json::Member& m : header.as_object()) {
    if (m.first == "__metadata__") {
      if (!m.second.is_object()) ctx.fail("\"__metadata__\" must be an object of strings");
      for (const json::Member& kv : m.second.as_object()) {
        if (!kv.second.is_string()) ctx.fail("\"__metadata__\" entry \"" + kv.first + "\" is not a string");
        f.metadata_.emplace(kv.first, kv.second.as_string());
      }
      continue;
    }
    f.tensors_.push_back(parse_entry(ctx, m.first, m.second, data_size));
  }

  // Overlapping tensors would alias each other's memory; a well-formed writer never produces them.
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : f.tensors_)
    if (t.nbytes() > 0) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      ctx.fail_tensor(by_offset[i]->name, "data overlaps tensor '" + by_offset[i - 1]->name + "'");
    }
  }
  f.file_ = std::move(bytes);
  return f;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

const TensorInfo& SafetensorsFile::info(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (!t) throw LoadError(path() + ": no tensor named '" + std::string(name) + "'");
  return *t;
}

const uint8_t* SafetensorsFile::data(std::string_view name) const { return data_section_ + info(name).begin; }

TensorView SafetensorsFile::view(std::string_view name) const {
  const TensorInfo& t = info(name);
  TensorView v;
  if (!to_dtype(t.dtype, &v.dtype)) {
    throw DTypeError(path() + ": tensor '" + t.name + "': dtype " + file_dtype_name(t.dtype) +
                     " has no attnzoo dtype (use data() for raw bytes)");
  }
  if (t.shape.size() > size_t(TensorView::kMaxDims)) {
    throw LoadError(path() + ": tensor '" + t.name + "': " + std::to_string(t.shape.size()) +
                    " dimensions, more than the " + std::to_string(TensorView::kMaxDims) + " a view holds");
  }
  const uint8_t* p = data_section_ + t.begin;
  if (reinterpret_cast<uintptr_t>(p) % file_dtype_size(t.dtype) != 0) {
    throw LoadError(path() + ": tensor '" + t.name + "': data at file offset " +
                    std::to_string(p - file_->data()) + " is not aligned to its " +
                    std::to_string(file_dtype_size(t.dtype)) + "-byte elements");
  }
  v.data = const_cast<uint8_t*>(p);  // TensorView has no const flavour; the pages are mapped read-only
  v.ndim = int(t.shape.size());
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    v.shape[d] = t.shape[d];
    v.strides[d] = stride;
    stride *= t.shape[d];
  }
  return v;
}

uint64_t SafetensorsFile::total_bytes() const {
  uint64_t n = 0;
  for (const TensorInfo& t : tensors_) n += t.nbytes();
  return n;
}

}  // namespace attnzoo
