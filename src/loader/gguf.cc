#include "loader/gguf.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <tuple>

#include <sys/stat.h>

namespace attnzoo {

static_assert(std::endian::native == std::endian::little, "GGUF files are read as little-endian");

uint64_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    default: return 0;
  }
}

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kDefaultAlignment = 32;

constexpr const char* kTypeNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                      "bool", "string", "array", "u64", "i64", "f64"};

bool known_type(uint32_t t) { return t <= uint32_t(GgufType::F64); }

// Bytes one element of this type takes at least in the file: counts are capped by it, so a count the file cannot
// hold is refused before anything is allocated.
uint64_t min_encoded_bytes(GgufType t) {
  if (t == GgufType::STRING) return 8;  // the length
  if (t == GgufType::ARRAY) return 12;  // element type + count
  const uint64_t n = gguf_scalar_size(t);
  return n ? n : 1;
}

bool is_scalar(GgufType t) { return t != GgufType::STRING && t != GgufType::ARRAY; }

std::string quoted(std::string_view s) {  // appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "'" + s
  std::string q(1, '\'');
  q += s;
  q += '\'';
  return q;
}

}  // namespace

const char* gguf_type_name(GgufType t) { return known_type(uint32_t(t)) ? kTypeNames[uint32_t(t)] : "?"; }

namespace {

// Names the field being read, for error messages: composed without allocating (a field, its suffix, an array
// index) and spelled out only when a check fails, so a 150k-entry vocabulary builds no label per element.
class What {
 public:
  What(const char* text) : text_(text) {}          // NOLINT: labels are written as literals at the call sites
  What(const std::string& text) : text_(text) {}   // NOLINT: the string outlives every call it is passed to
  What sub(const char* suffix) const { return What(this, suffix); }  // "<this><suffix>"
  What at(uint64_t i) const { return What(this, i); }                // "<this>[i]"
  std::string str() const {
    std::string s = parent_ ? parent_->str() : std::string();
    if (indexed_) {
      s += '[';
      s += std::to_string(index_);
      s += ']';
    } else {
      s += text_;
    }
    return s;
  }

 private:
  What(const What* parent, const char* suffix) : parent_(parent), text_(suffix) {}
  What(const What* parent, uint64_t i) : parent_(parent), index_(i), indexed_(true) {}
  const What* parent_ = nullptr;
  std::string_view text_;
  uint64_t index_ = 0;
  bool indexed_ = false;
};

}  // namespace

// Reads the file front to back. `what` names the field being read, so every error says where it is.
class GgufParser {
 public:
  explicit GgufParser(const MappedFile& f) : f_(f), end_(std::min<uint64_t>(f.size(), GgufFile::kMaxMetadataBytes)) {}

  [[noreturn]] void fail(const std::string& message) const { throw LoadError(f_.path() + ": " + message); }

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return end_ - pos_; }

  void need(uint64_t n, const What& what) {
    if (n > left()) {
      if (end_ < f_.size())
        fail(what.str() + ": the header runs past the " + std::to_string(GgufFile::kMaxMetadataBytes) + "-byte limit on metadata");
      fail(what.str() + ": needs " + std::to_string(n) + " bytes at file offset " + std::to_string(pos_) + ", but the " +
           std::to_string(f_.size()) + "-byte file ends first (truncated?)");
    }
  }

  template <typename T>
  T read(const What& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, f_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // Counts what parsed values will hold in memory before they are allocated.
  void charge(uint64_t bytes, const What& what) {
    if (bytes > GgufFile::kMaxMetadataMemory - memory_)
      fail(what.str() + ": the metadata would take more than " + std::to_string(GgufFile::kMaxMetadataMemory) + " bytes in memory");
    memory_ += bytes;
  }

  std::string read_string(const What& what) {
    const uint64_t n = read<uint64_t>(what.sub(" (string length)"));
    if (n > left()) {
      fail(what.str() + ": string length " + std::to_string(n) + " at file offset " + std::to_string(pos_ - 8) +
           " is more than the " + std::to_string(left()) + " bytes left");
    }
    charge(sizeof(std::string) + n, what);
    std::string s(reinterpret_cast<const char*>(f_.data() + pos_), size_t(n));
    pos_ += n;
    return s;
  }

  GgufType read_type(const What& what) {
    const uint32_t t = read<uint32_t>(what.sub(" (value type)"));
    if (!known_type(t)) fail(what.str() + ": unknown value type " + std::to_string(t));
    return GgufType(t);
  }

  GgufValue read_value(GgufType type, const What& what, int depth) {
    GgufValue v;
    v.type_ = type;
    switch (type) {
      case GgufType::STRING: v.string_ = read_string(what); return v;
      case GgufType::ARRAY: read_array(v, what, depth); return v;
      case GgufType::BOOL: {
        const uint8_t b = read<uint8_t>(what);
        if (b > 1) fail(what.str() + ": bool value " + std::to_string(b) + " is neither 0 nor 1");
        v.bits_ = b;
        return v;
      }
      default: {
        const uint64_t n = min_encoded_bytes(type);
        need(n, what);
        std::memcpy(&v.bits_, f_.data() + pos_, n);
        pos_ += n;
        return v;
      }
    }
  }

  void read_array(GgufValue& v, const What& what, int depth) {
    if (depth >= GgufFile::kMaxArrayDepth)
      fail(what.str() + ": arrays nested more than " + std::to_string(GgufFile::kMaxArrayDepth) + " deep");
    v.elem_type_ = read_type(what.sub(" (array element type)"));
    v.count_ = read<uint64_t>(what.sub(" (array length)"));
    const uint64_t min = min_encoded_bytes(v.elem_type_);
    if (v.count_ > left() / min) {
      fail(what.str() + ": array length " + std::to_string(v.count_) + " of " + gguf_type_name(v.elem_type_) +
           " cannot fit in the " + std::to_string(left()) + " bytes left");
    }
    charge(v.count_ * (is_scalar(v.elem_type_) ? min : v.elem_type_ == GgufType::STRING ? sizeof(std::string) : sizeof(GgufValue)),
           what);
    if (is_scalar(v.elem_type_)) {
      const uint64_t n = v.count_ * min;
      v.packed_.assign(f_.data() + pos_, f_.data() + pos_ + n);
      pos_ += n;
      if (v.elem_type_ == GgufType::BOOL) {
        for (uint64_t i = 0; i < v.count_; ++i)
          if (v.packed_[i] > 1) fail(what.at(i).str() + ": bool value is neither 0 nor 1");
      }
    } else if (v.elem_type_ == GgufType::STRING) {
      v.strings_.reserve(size_t(v.count_));
      for (uint64_t i = 0; i < v.count_; ++i) v.strings_.push_back(read_string(what.at(i)));
    } else {
      v.arrays_.reserve(size_t(v.count_));
      for (uint64_t i = 0; i < v.count_; ++i)
        v.arrays_.push_back(read_value(GgufType::ARRAY, what.at(i), depth + 1));
    }
  }

 private:
  const MappedFile& f_;
  uint64_t end_;
  uint64_t pos_ = 0;
  uint64_t memory_ = 0;
};

int64_t GgufValue::as_int(std::string_view what) const {
  auto bad = [&](const std::string& m) -> int64_t { throw LoadError(std::string(what) + ": " + m); };
  switch (type_) {
    case GgufType::U8: return int64_t(uint8_t(bits_));
    case GgufType::I8: return int64_t(int8_t(bits_));
    case GgufType::U16: return int64_t(uint16_t(bits_));
    case GgufType::I16: return int64_t(int16_t(bits_));
    case GgufType::U32: return int64_t(uint32_t(bits_));
    case GgufType::I32: return int64_t(int32_t(bits_));
    case GgufType::I64: return int64_t(bits_);
    case GgufType::U64:
      if (bits_ > uint64_t(std::numeric_limits<int64_t>::max())) return bad("u64 value " + std::to_string(bits_) + " is over INT64_MAX");
      return int64_t(bits_);
    default: return bad(std::string("expected an integer, got ") + gguf_type_name(type_));
  }
}

double GgufValue::as_float(std::string_view what) const {
  if (type_ == GgufType::F32) return double(std::bit_cast<float>(uint32_t(bits_)));
  if (type_ == GgufType::F64) return std::bit_cast<double>(bits_);
  throw LoadError(std::string(what) + ": expected f32 or f64, got " + gguf_type_name(type_));
}

bool GgufValue::as_bool(std::string_view what) const {
  if (type_ != GgufType::BOOL) throw LoadError(std::string(what) + ": expected bool, got " + gguf_type_name(type_));
  return bits_ != 0;
}

const std::string& GgufValue::as_string(std::string_view what) const {
  if (type_ != GgufType::STRING) throw LoadError(std::string(what) + ": expected string, got " + gguf_type_name(type_));
  return string_;
}

GgufValue GgufValue::at(uint64_t i) const {
  if (type_ != GgufType::ARRAY) throw ArgumentError(std::string("GgufValue::at: value is a ") + gguf_type_name(type_));
  if (i >= count_) throw ArgumentError("GgufValue::at: index " + std::to_string(i) + " out of " + std::to_string(count_));
  if (elem_type_ == GgufType::STRING) {
    GgufValue s;
    s.type_ = GgufType::STRING;
    s.string_ = strings_[size_t(i)];
    return s;
  }
  if (elem_type_ == GgufType::ARRAY) return arrays_[size_t(i)];
  GgufValue s;
  s.type_ = elem_type_;
  const uint64_t n = min_encoded_bytes(elem_type_);
  std::memcpy(&s.bits_, packed_.data() + i * n, n);
  return s;
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // checked against overflow when the file was read
  return n;
}

int64_t GgufTensor::row_bytes() const { return *quant_row_bytes(type, ne.empty() ? 1 : ne[0]); }

GgufFile GgufFile::open(const std::string& path) { return parse(MappedFile::open(path)); }

namespace {

std::atomic<uint64_t> g_parses{0};

}  // namespace

uint64_t GgufFile::parse_count() { return g_parses.load(); }

std::shared_ptr<const GgufFile> GgufFile::open_shared(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::make_shared<const GgufFile>(open(path));  // open names the error
  using Key = std::tuple<std::string, uint64_t, uint64_t, int64_t, int64_t, int64_t>;
  const Key key{path, uint64_t(st.st_dev), uint64_t(st.st_ino), int64_t(st.st_size), int64_t(st.st_mtim.tv_sec),
                int64_t(st.st_mtim.tv_nsec)};
  static std::mutex mutex;
  static std::map<Key, std::weak_ptr<const GgufFile>> parsed;
  static std::shared_ptr<const GgufFile> last;  // the next loader of the same checkpoint usually comes right after
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = parsed.find(key); it != parsed.end()) {
    if (auto f = it->second.lock()) return last = f;
  }
  std::erase_if(parsed, [](const auto& kv) { return kv.second.expired(); });
  auto f = std::make_shared<const GgufFile>(open(path));
  parsed[key] = f;
  return last = f;
}

GgufFile GgufFile::parse(std::shared_ptr<const MappedFile> bytes) {
  g_parses.fetch_add(1);
  GgufParser p(*bytes);
  GgufFile g;
  if (bytes->size() < 4) p.fail("file is " + std::to_string(bytes->size()) + " bytes, too short for the GGUF magic (truncated?)");
  const uint32_t magic = p.read<uint32_t>("magic");
  if (magic != kMagic) p.fail("bad magic (expected \"GGUF\"; not a GGUF file)");
  g.version_ = p.read<uint32_t>("version");
  if (g.version_ == 1) p.fail("GGUF version 1 is not supported (re-convert the model with a current llama.cpp)");
  if ((g.version_ & 0xffff) == 0 && g.version_ != 0)
    p.fail("version field " + std::to_string(g.version_) + " looks byte-swapped (a big-endian GGUF file?)");
  if (g.version_ < 2 || g.version_ > 3) p.fail("GGUF version " + std::to_string(g.version_) + " is not supported (2 and 3 are)");
  const uint64_t n_tensors = p.read<uint64_t>("tensor count");
  const uint64_t n_kv = p.read<uint64_t>("metadata count");
  // Each metadata entry takes at least 8 (key length) + 4 (type) + 1 bytes, each tensor info 8 + 4 + 8 + 4 + 8.
  if (n_kv > p.left() / 13) p.fail("metadata count " + std::to_string(n_kv) + " cannot fit in the file");
  if (n_tensors > p.left() / 32) p.fail("tensor count " + std::to_string(n_tensors) + " cannot fit in the file");

  p.charge(n_kv * sizeof(std::pair<std::string, GgufValue>) + n_tensors * sizeof(GgufTensor), "metadata and tensor counts");
  g.metadata_.reserve(size_t(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string entry = "metadata entry " + std::to_string(i) + " key";
    std::string key = p.read_string(entry);
    const std::string what = "key " + quoted(key);
    if (g.key_index_.count(key)) p.fail(what + ": duplicate key (metadata entry " + std::to_string(i) + ")");
    const GgufType type = p.read_type(what);
    GgufValue v = p.read_value(type, what, 0);
    g.key_index_.emplace(key, g.metadata_.size());
    g.metadata_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = g.find("general.alignment")) {
    if (a->type() != GgufType::U32) p.fail(std::string("key 'general.alignment': expected u32, got ") + gguf_type_name(a->type()));
    const uint64_t al = uint32_t(a->raw_bits());
    if (al == 0 || !std::has_single_bit(al))
      p.fail("key 'general.alignment': " + std::to_string(al) + " is not a non-zero power of two");
    g.alignment_ = al;
  } else {
    g.alignment_ = kDefaultAlignment;
  }

  g.tensors_.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    t.name = p.read_string("tensor info " + std::to_string(i) + " name");
    const std::string what = "tensor " + quoted(t.name);
    const What field(what);
    if (g.tensor_index_.count(t.name)) p.fail(what + ": duplicate tensor name (tensor info " + std::to_string(i) + ")");
    const uint32_t n_dims = p.read<uint32_t>(field.sub(" n_dims"));
    if (n_dims == 0 || n_dims > kMaxDims)
      p.fail(what + ": n_dims " + std::to_string(n_dims) + " is outside 1.." + std::to_string(kMaxDims));
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = p.read<uint64_t>(field.sub(" ne").at(d));
      if (ne > uint64_t(std::numeric_limits<int64_t>::max()))
        p.fail(what + ": ne[" + std::to_string(d) + "] = " + std::to_string(ne) + " is over INT64_MAX");
      if (__builtin_mul_overflow(numel, ne, &numel) || numel > uint64_t(std::numeric_limits<int64_t>::max()))
        p.fail(what + ": the dimensions' product overflows int64");
      t.ne.push_back(int64_t(ne));
    }
    const uint32_t type_id = p.read<uint32_t>(field.sub(" type"));
    const auto info = quant_type_info(type_id);
    if (!info) p.fail(what + ": unknown ggml type id " + std::to_string(type_id));
    t.type = info->type;
    const auto row = quant_row_bytes(t.type, t.ne[0]);
    if (!row && t.ne[0] % info->block_elems == 0) p.fail(what + ": byte size overflows int64");
    if (!row)
      p.fail(what + ": row length ne[0] = " + std::to_string(t.ne[0]) + " is not a whole number of " + info->name +
             " blocks (" + std::to_string(info->block_elems) + " elements)");
    const uint64_t rows = t.ne[0] == 0 ? 0 : numel / uint64_t(t.ne[0]);
    uint64_t total = 0;
    if (__builtin_mul_overflow(rows, uint64_t(*row), &total) || total > uint64_t(std::numeric_limits<int64_t>::max()))
      p.fail(what + ": byte size overflows int64");
    t.bytes = int64_t(total);
    t.offset = p.read<uint64_t>(field.sub(" offset"));
    if (t.offset % g.alignment_ != 0)
      p.fail(what + ": data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
             std::to_string(g.alignment_));
    g.tensor_index_.emplace(t.name, g.tensors_.size());
    g.tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment (the padding may be cut off when no tensor
  // has data, so the check is on each tensor's end rather than on the padding itself).
  const uint64_t header_end = p.pos();
  const uint64_t data_offset = (header_end + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  g.data_offset_ = data_offset;
  const uint64_t size = bytes->size();
  const uint64_t data_size = size > data_offset ? size - data_offset : 0;
  for (GgufTensor& t : g.tensors_) {
    if (uint64_t(t.bytes) > data_size || t.offset > data_size - uint64_t(t.bytes)) {
      p.fail("tensor " + quoted(t.name) + ": data [" + std::to_string(t.offset) + ", +" + std::to_string(t.bytes) +
             ") runs past the end of the " + std::to_string(data_size) + "-byte data section (truncated?)");
    }
    t.data = bytes->data() + data_offset + t.offset;
  }
  std::vector<const GgufTensor*> by_offset;
  for (const GgufTensor& t : g.tensors_)
    if (t.bytes > 0) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->offset < by_offset[i - 1]->offset + uint64_t(by_offset[i - 1]->bytes))
      p.fail("tensor " + quoted(by_offset[i]->name) + ": data overlaps tensor " + quoted(by_offset[i - 1]->name));
  }
  g.file_ = std::move(bytes);
  return g;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufValue& GgufFile::get(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) throw LoadError(path() + ": key " + quoted(key) + ": missing");
  return *v;
}

const GgufValue& GgufFile::typed(std::string_view key, GgufType want) const {
  const GgufValue& v = get(key);
  if (v.type() != want)
    throw LoadError(path() + ": key " + quoted(key) + ": expected " + gguf_type_name(want) + ", got " +
                    gguf_type_name(v.type()));
  return v;
}

uint8_t GgufFile::get_u8(std::string_view key) const { return uint8_t(typed(key, GgufType::U8).raw_bits()); }
int8_t GgufFile::get_i8(std::string_view key) const { return int8_t(typed(key, GgufType::I8).raw_bits()); }
uint16_t GgufFile::get_u16(std::string_view key) const { return uint16_t(typed(key, GgufType::U16).raw_bits()); }
int16_t GgufFile::get_i16(std::string_view key) const { return int16_t(typed(key, GgufType::I16).raw_bits()); }
uint32_t GgufFile::get_u32(std::string_view key) const { return uint32_t(typed(key, GgufType::U32).raw_bits()); }
int32_t GgufFile::get_i32(std::string_view key) const { return int32_t(typed(key, GgufType::I32).raw_bits()); }
uint64_t GgufFile::get_u64(std::string_view key) const { return typed(key, GgufType::U64).raw_bits(); }
int64_t GgufFile::get_i64(std::string_view key) const { return int64_t(typed(key, GgufType::I64).raw_bits()); }
float GgufFile::get_f32(std::string_view key) const {
  return std::bit_cast<float>(uint32_t(typed(key, GgufType::F32).raw_bits()));
}
double GgufFile::get_f64(std::string_view key) const { return std::bit_cast<double>(typed(key, GgufType::F64).raw_bits()); }
bool GgufFile::get_bool(std::string_view key) const { return typed(key, GgufType::BOOL).raw_bits() != 0; }
const std::string& GgufFile::get_string(std::string_view key) const {
  return typed(key, GgufType::STRING).as_string(key);
}
const GgufValue& GgufFile::get_array(std::string_view key) const { return typed(key, GgufType::ARRAY); }
int64_t GgufFile::get_int(std::string_view key) const { return get(key).as_int(path() + ": key " + quoted(key)); }
double GgufFile::get_float(std::string_view key) const {
  const std::string what = path() + ": key " + quoted(key);
  const double v = get(key).as_float(what);
  // The model reads these (epsilons, RoPE bases, scales): a NaN would reach its config as null, so the default.
  if (!std::isfinite(v)) throw LoadError(what + ": must be a finite number, got " + std::to_string(v));
  return v;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(std::string_view name) const {
  const GgufTensor* t = find_tensor(name);
  if (!t) throw LoadError(path() + ": no tensor named " + quoted(name));
  return *t;
}

}  // namespace attnzoo
