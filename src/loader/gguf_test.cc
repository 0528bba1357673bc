#include "loader/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <functional>

#include "loader/gguf_test_files.h"
#include "loader/test_files.h"

namespace attnzoo {
namespace {

using namespace testing;  // NOLINT: the spec helpers

enum : uint32_t { U8 = 0, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 };

Bytes u32s(std::initializer_list<uint32_t> v) {
  Bytes b;
  for (uint32_t x : v) put(b, x);
  return b;
}

Bytes strings(std::initializer_list<std::string> v) {
  Bytes b;
  for (const std::string& s : v) put_string(b, s);
  return b;
}

Bytes filled(size_t n, uint8_t seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = uint8_t(seed + 7 * i);
  return b;
}

// A valid file with every metadata value type and three tensor types.
GgufSpec valid_spec() {
  GgufSpec s;
  Bytes inner;  // [[1, -2], []] as arrays of i16
  {
    Bytes e;
    put<int16_t>(e, 1);
    put<int16_t>(e, -2);
    const Bytes a = array_value(I16, 2, e), b = array_value(I16, 0, {});
    inner.insert(inner.end(), a.begin(), a.end());
    inner.insert(inner.end(), b.begin(), b.end());
  }
  s.kvs = {
      kv_string("general.architecture", "llama"),
      kv_scalar<uint8_t>("v.u8", U8, 200),
      kv_scalar<int8_t>("v.i8", I8, -100),
      kv_scalar<uint16_t>("v.u16", U16, 60000),
      kv_scalar<int16_t>("v.i16", I16, -30000),
      kv_scalar<uint32_t>("v.u32", U32, 4000000000u),
      kv_scalar<int32_t>("v.i32", I32, -2000000000),
      kv_scalar<float>("v.f32", F32, 1.5f),
      kv_scalar<uint8_t>("v.bool", BOOL, 1),
      kv_scalar<uint64_t>("v.u64", U64, 18000000000000000000ull),
      kv_scalar<int64_t>("v.i64", I64, -9000000000000000000ll),
      kv_scalar<double>("v.f64", F64, -0.25),
      kv_string("v.string", "h\xC3\xA9llo"),
      kv_array("v.array_u32", U32, 3, u32s({1, 2, 3})),
      kv_array("v.array_string", STRING, 2, strings({"a", ""})),
      kv_array("v.array_nested", ARRAY, 2, inner),
      kv_scalar<uint32_t>("general.alignment", U32, 32),
  };
  s.tensors = {
      {"a", {3, 2}, 0, filled(24, 1), std::nullopt},       // F32 [2, 3]
      {"b", {32, 2}, 3, filled(40, 2), std::nullopt},      // Q4_1: two 20-byte rows
      {"c", {4}, 1, filled(8, 3), std::nullopt},           // F16
  };
  return s;
}

GgufFile parse(const Bytes& b) { return GgufFile::parse(MappedFile::from_bytes(b, "t.gguf")); }

TEST(Gguf, ReadsEveryValueType) {
  const GgufFile f = parse(gguf_bytes(valid_spec()));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 17u);
  EXPECT_EQ(f.metadata()[0].first, "general.architecture");
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_u8("v.u8"), 200);
  EXPECT_EQ(f.get_i8("v.i8"), -100);
  EXPECT_EQ(f.get_u16("v.u16"), 60000);
  EXPECT_EQ(f.get_i16("v.i16"), -30000);
  EXPECT_EQ(f.get_u32("v.u32"), 4000000000u);
  EXPECT_EQ(f.get_i32("v.i32"), -2000000000);
  EXPECT_EQ(f.get_f32("v.f32"), 1.5f);
  EXPECT_TRUE(f.get_bool("v.bool"));
  EXPECT_EQ(f.get_u64("v.u64"), 18000000000000000000ull);
  EXPECT_EQ(f.get_i64("v.i64"), -9000000000000000000ll);
  EXPECT_EQ(f.get_f64("v.f64"), -0.25);
  EXPECT_EQ(f.get_string("v.string"), "h\xC3\xA9llo");
  EXPECT_EQ(f.get_int("v.u32"), 4000000000);
  EXPECT_EQ(f.get_int("v.i8"), -100);
  EXPECT_EQ(f.get_float("v.f32"), 1.5);
  EXPECT_EQ(f.get_float("v.f64"), -0.25);

  const GgufValue& a = f.get_array("v.array_u32");
  EXPECT_EQ(a.elem_type(), GgufType::U32);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a.at(2).as_int("x"), 3);
  EXPECT_EQ(a.packed().size(), 12u);
  const GgufValue& s = f.get_array("v.array_string");
  EXPECT_EQ(s.strings(), (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(s.at(0).as_string("x"), "a");
  const GgufValue& n = f.get_array("v.array_nested");
  ASSERT_EQ(n.arrays().size(), 2u);
  EXPECT_EQ(n.arrays()[0].elem_type(), GgufType::I16);
  EXPECT_EQ(n.arrays()[0].at(1).as_int("x"), -2);
  EXPECT_EQ(n.arrays()[1].size(), 0u);
}

TEST(Gguf, TensorsAreViewsOfTheData) {
  const Bytes bytes = gguf_bytes(valid_spec());
  const GgufFile f = parse(bytes);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  const GgufTensor& a = f.tensor("a");
  EXPECT_EQ(a.ne, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(a.type, QuantType::F32);
  EXPECT_EQ(a.bytes, 24);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(std::vector<uint8_t>(a.data, a.data + a.bytes), filled(24, 1));
  const GgufTensor& b = f.tensor("b");
  EXPECT_EQ(b.type, QuantType::Q4_1);
  EXPECT_EQ(b.offset, 32u);
  EXPECT_EQ(b.row_bytes(), 20);
  EXPECT_EQ(b.numel(), 64);
  EXPECT_EQ(std::vector<uint8_t>(b.data, b.data + b.bytes), filled(40, 2));
  EXPECT_EQ(f.tensor("c").bytes, 8);
  EXPECT_EQ(f.find_tensor("d"), nullptr);
  EXPECT_EQ(f.tensor("c").data, f.mapping()->data() + f.data_offset() + 96);
}

TEST(Gguf, VersionTwoAndOtherAlignments) {
  GgufSpec s = valid_spec();
  s.version = 2;
  s.alignment = 64;
  s.kvs.back() = kv_scalar<uint32_t>("general.alignment", U32, 64);
  const GgufFile f = parse(gguf_bytes(s));
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.tensor("c").offset, 128u);
  EXPECT_EQ(std::vector<uint8_t>(f.tensor("c").data, f.tensor("c").data + 8), filled(8, 3));
}

TEST(Gguf, GettersNameTheKey) {
  const GgufFile f = parse(gguf_bytes(valid_spec()));
  auto message = [](const std::function<void()>& fn) {
    try {
      fn();
    } catch (const LoadError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { f.get_u32("v.i32"); }), "t.gguf: key 'v.i32': expected u32, got i32");
  EXPECT_EQ(message([&] { f.get_string("nope"); }), "t.gguf: key 'nope': missing");
  EXPECT_EQ(message([&] { f.get_array("v.string"); }), "t.gguf: key 'v.string': expected array, got string");
  EXPECT_EQ(message([&] { f.get_int("v.u64"); }), "t.gguf: key 'v.u64': u64 value 18000000000000000000 is over INT64_MAX");
  EXPECT_EQ(message([&] { f.get_float("v.u8"); }), "t.gguf: key 'v.u8': expected f32 or f64, got u8");
  EXPECT_EQ(message([&] { f.tensor("zz"); }), "t.gguf: no tensor named 'zz'");
  EXPECT_FALSE(f.has("nope"));
  EXPECT_TRUE(f.has("v.f64"));
}

// The corruption catalogue: each broken file must be refused with its own message, naming the file and the field.
struct Corruption {
  const char* name;
  std::function<Bytes()> make;
  const char* expect;  // a substring of the error
};

GgufKvSpec& kv(GgufSpec& s, const std::string& key) {
  for (auto& k : s.kvs)
    if (k.key == key) return k;
  throw std::logic_error(key);
}

Bytes with(const std::function<void(GgufSpec&)>& edit) {
  GgufSpec s = valid_spec();
  edit(s);
  return gguf_bytes(s);
}

Bytes nested_arrays(int depth) {
  Bytes v = array_value(U8, 0, {});
  for (int i = 1; i < depth; ++i) v = array_value(ARRAY, 1, v);
  return v;
}

std::vector<Corruption> corruptions() {
  const Bytes good = gguf_bytes(valid_spec());
  return {
      {"too short for magic", [good] { return Bytes(good.begin(), good.begin() + 3); }, "too short for the GGUF magic"},
      {"truncated header", [good] { return Bytes(good.begin(), good.begin() + 12); },
       "tensor count: needs 8 bytes at file offset 8"},
      {"truncated metadata",
       [good] {
         const std::string key = "v.f64";
         const auto at = std::search(good.begin(), good.end(), key.begin(), key.end());
         return Bytes(good.begin(), at + long(key.size()) + 4 + 4);  // half of the f64 value is left
       },
       "key 'v.f64': needs 8 bytes at file offset"},
      {"bad magic", [good] { Bytes b = good; b[0] = 'X'; return b; }, "bad magic"},
      {"version 1", [] { return with([](GgufSpec& s) { s.version = 1; }); }, "GGUF version 1 is not supported"},
      {"version 4", [] { return with([](GgufSpec& s) { s.version = 4; }); }, "GGUF version 4 is not supported"},
      {"big-endian", [] { return with([](GgufSpec& s) { s.version = 0x03000000; }); }, "byte-swapped"},
      {"huge tensor count", [] { return with([](GgufSpec& s) { s.tensor_count = uint64_t(1) << 60; }); },
       "tensor count 1152921504606846976 cannot fit"},
      {"huge metadata count", [] { return with([](GgufSpec& s) { s.kv_count = ~uint64_t(0); }); },
       "metadata count 18446744073709551615 cannot fit"},
      {"huge key length", [good] { Bytes b = good; b[24 + 7] = 0x7f; return b; }, "metadata entry 0 key: string length"},
      {"huge string length",
       [] { return with([](GgufSpec& s) { kv(s, "v.string").value[6] = 0x10; }); },
       "key 'v.string': string length 4503599627370502"},
      {"huge array length",
       [] { return with([](GgufSpec& s) { kv(s, "v.array_u32") = kv_array("v.array_u32", U32, uint64_t(1) << 40, u32s({1})); }); },
       "key 'v.array_u32': array length 1099511627776 of u32 cannot fit"},
      {"array of strings longer than the file",
       [] { return with([](GgufSpec& s) { kv(s, "v.array_string") = kv_array("v.array_string", STRING, 1 << 20, {}); }); },
       "key 'v.array_string': array length 1048576 of string cannot fit"},
      {"nested array bomb",
       [] { return with([](GgufSpec& s) { s.kvs.push_back({"bomb", ARRAY, nested_arrays(9)}); }); },
       "key 'bomb'[0][0][0][0][0][0][0][0]: arrays nested more than 8 deep"},
      {"unknown value type", [] { return with([](GgufSpec& s) { kv(s, "v.u8").type = 13; }); },
       "key 'v.u8': unknown value type 13"},
      {"unknown array element type",
       [] { return with([](GgufSpec& s) { kv(s, "v.array_u32").value[0] = 99; }); },
       "key 'v.array_u32' (array element type): unknown value type 99"},
      {"bool not 0 or 1", [] { return with([](GgufSpec& s) { kv(s, "v.bool").value[0] = 2; }); },
       "key 'v.bool': bool value 2 is neither 0 nor 1"},
      {"duplicate key", [] { return with([](GgufSpec& s) { s.kvs.push_back(kv_string("v.u8", "again")); }); },
       "key 'v.u8': duplicate key"},
      {"alignment not a power of two",
       [] { return with([](GgufSpec& s) { kv(s, "general.alignment") = kv_scalar<uint32_t>("general.alignment", U32, 48); }); },
       "key 'general.alignment': 48 is not a non-zero power of two"},
      {"alignment zero",
       [] { return with([](GgufSpec& s) { kv(s, "general.alignment") = kv_scalar<uint32_t>("general.alignment", U32, 0); }); },
       "key 'general.alignment': 0 is not a non-zero power of two"},
      {"alignment of another type",
       [] { return with([](GgufSpec& s) { kv(s, "general.alignment") = kv_scalar<uint64_t>("general.alignment", U64, 32); }); },
       "key 'general.alignment': expected u32, got u64"},
      {"n_dims 0", [] { return with([](GgufSpec& s) { s.tensors[1].ne = {}; }); },
       "tensor 'b': n_dims 0 is outside 1..4"},
      {"n_dims 5", [] { return with([](GgufSpec& s) { s.tensors[1].ne = {32, 1, 1, 1, 2}; }); },
       "tensor 'b': n_dims 5 is outside 1..4"},
      {"dimension over int64", [] { return with([](GgufSpec& s) { s.tensors[0].ne = {3, ~uint64_t(0)}; }); },
       "tensor 'a': ne[1] = 18446744073709551615 is over INT64_MAX"},
      {"dims product overflow",
       [] { return with([](GgufSpec& s) { s.tensors[0].ne = {uint64_t(1) << 32, uint64_t(1) << 32}; }); },
       "tensor 'a': the dimensions' product overflows int64"},
      {"byte size overflow", [] { return with([](GgufSpec& s) { s.tensors[0].ne = {uint64_t(1) << 62}; }); },
       "tensor 'a': byte size overflows int64"},
      {"unknown type id", [] { return with([](GgufSpec& s) { s.tensors[0].type = 4; }); },
       "tensor 'a': unknown ggml type id 4"},
      {"row not whole blocks", [] { return with([](GgufSpec& s) { s.tensors[1].ne = {33, 2}; }); },
       "tensor 'b': row length ne[0] = 33 is not a whole number of Q4_1 blocks (32 elements)"},
      {"offset past end", [] { return with([](GgufSpec& s) { s.tensors[2].offset = 1 << 20; }); },
       "tensor 'c': data [1048576, +8) runs past the end of the 104-byte data section"},
      {"offset near 2^64", [] { return with([](GgufSpec& s) { s.tensors[2].offset = ~uint64_t(31); }); },
       "tensor 'c': data [18446744073709551584, +8) runs past the end"},
      {"misaligned offset", [] { return with([](GgufSpec& s) { s.tensors[1].offset = 36; }); },
       "tensor 'b': data offset 36 is not a multiple of the alignment 32"},
      {"overlapping data", [] { return with([](GgufSpec& s) { s.tensors[2].offset = 32; }); },
       "data overlaps tensor 'b'"},
      {"truncated data", [good] { return Bytes(good.begin(), good.end() - 1); },
       "tensor 'c': data [96, +8) runs past the end of the 103-byte data section (truncated?)"},
      // The i-quants are sized from the same table: a file claiming IQ4 rows it does not hold is refused by name.
      {"IQ4_XS row not whole blocks",
       [] { return with([](GgufSpec& s) { s.tensors[1] = {"b", {128, 2}, 23, filled(136, 2), std::nullopt}; }); },
       "tensor 'b': row length ne[0] = 128 is not a whole number of IQ4_XS blocks (256 elements)"},
      {"IQ4_XS shape larger than its data",
       [] { return with([](GgufSpec& s) { s.tensors[2] = {"c", {512}, 23, filled(136, 3), std::nullopt}; }); },
       "tensor 'c': data [96, +272) runs past the end of the 232-byte data section"},
      {"truncated IQ4_NL data",
       [] {
         const Bytes b = with([](GgufSpec& s) { s.tensors[2] = {"c", {64}, 20, filled(36, 3), std::nullopt}; });
         return Bytes(b.begin(), b.end() - 1);
       },
       "tensor 'c': data [96, +36) runs past the end of the 131-byte data section (truncated?)"},
      {"duplicate tensor name", [] { return with([](GgufSpec& s) { s.tensors[2].name = "a"; }); },
       "tensor 'a': duplicate tensor name (tensor info 2)"},
  };
}

TEST(Gguf, CorruptFilesGiveNamedErrors) {
  const auto list = corruptions();
  EXPECT_GE(list.size(), 30u);
  for (const Corruption& c : list) {
    SCOPED_TRACE(c.name);
    const Bytes b = c.make();
    try {
      GgufFile::parse(MappedFile::from_bytes(b, "corrupt.gguf"));
      ADD_FAILURE() << c.name << ": accepted";
    } catch (const LoadError& e) {
      const std::string m = e.what();
      EXPECT_TRUE(m.starts_with("corrupt.gguf: ")) << m;
      EXPECT_NE(m.find(c.expect), std::string::npos) << c.name << ": got \"" << m << "\", expected \"" << c.expect << "\"";
    }
  }
}

TEST(Gguf, OpenNamesAMissingFile) {
  EXPECT_THROW(GgufFile::open("/nonexistent/x.gguf"), LoadError);
}

TEST(Gguf, OpensFromDisk) {
  ScratchDir dir;
  const std::string path = (dir.path() / "m.gguf").string();
  write_file(path, gguf_bytes(valid_spec()));
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.tensor("b").type, QuantType::Q4_1);
}

TEST(Gguf, OpenSharedParsesAFileOnceUntilItChanges) {
  ScratchDir dir;
  const std::string path = (dir.path() / "m.gguf").string();
  write_file(path, gguf_bytes(valid_spec()));
  const uint64_t before = GgufFile::parse_count();
  const auto a = GgufFile::open_shared(path);
  const auto b = GgufFile::open_shared(path);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(GgufFile::parse_count() - before, 1u);
  GgufSpec changed = valid_spec();
  changed.kvs.push_back(kv_string("general.name", "changed"));
  write_file(path, gguf_bytes(changed));  // another size: another file
  const auto c = GgufFile::open_shared(path);
  EXPECT_NE(c.get(), a.get());
  EXPECT_TRUE(c->has("general.name"));
  EXPECT_THROW(GgufFile::open_shared((dir.path() / "missing.gguf").string()), LoadError);
}

}  // namespace
}  // namespace attnzoo
