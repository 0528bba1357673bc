#include "loader/gguf_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "core/error.h"
#include "loader/gguf.h"
#include "loader/gguf_test_files.h"
#include "loader/test_files.h"

namespace attnzoo {
namespace {

using testing::ScratchDir;

std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return {b, b + n};
}

TEST(GgufWriter, EveryValueTypeAndTensorReadsBack) {
  ScratchDir dir;
  const std::string path = (dir.path() / "w.gguf").string();
  GgufWriter w(64);  // not the default: general.alignment written, data offsets multiples of 64
  w.add_u8("t.u8", 200);
  w.add_i8("t.i8", -100);
  w.add_u16("t.u16", 60000);
  w.add_i16("t.i16", -30000);
  w.add_u32("t.u32", 4000000000u);
  w.add_i32("t.i32", -2000000000);
  w.add_u64("t.u64", 1ull << 60);
  w.add_i64("t.i64", -(1ll << 60));
  w.add_f32("t.f32", 1.5f);
  w.add_f64("t.f64", -2.25);
  w.add_bool("t.bool", true);
  w.add_string("t.str", "h\xC3\xA9llo");
  w.add_string_array("t.strs", {"a", "", "ccc"});
  w.add_i32_array("t.i32s", {1, -2, 3});
  w.add_f32_array("t.f32s", {0.5f});
  const uint16_t u16s[2] = {7, 65535};
  w.add_scalar_array("t.u16s", GgufType::U16, u16s, 2);
  std::vector<float> a(6);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) - 2.5f;
  w.add_tensor("a", {3, 2}, QuantType::F32, [&] { return bytes_of(a.data(), 24); });
  std::vector<uint8_t> q(2 * 34, 9);
  w.add_tensor("q", {32, 2}, QuantType::Q8_0, [&] { return q; });
  w.add_tensor("b", {5}, QuantType::F16, [] { return std::vector<uint8_t>(10, 1); });
  w.write(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));

  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.get_u8("t.u8"), 200);
  EXPECT_EQ(f.get_i8("t.i8"), -100);
  EXPECT_EQ(f.get_u16("t.u16"), 60000);
  EXPECT_EQ(f.get_i16("t.i16"), -30000);
  EXPECT_EQ(f.get_u32("t.u32"), 4000000000u);
  EXPECT_EQ(f.get_i32("t.i32"), -2000000000);
  EXPECT_EQ(f.get_u64("t.u64"), 1ull << 60);
  EXPECT_EQ(f.get_i64("t.i64"), -(1ll << 60));
  EXPECT_EQ(f.get_f32("t.f32"), 1.5f);
  EXPECT_EQ(f.get_f64("t.f64"), -2.25);
  EXPECT_TRUE(f.get_bool("t.bool"));
  EXPECT_EQ(f.get_string("t.str"), "h\xC3\xA9llo");
  EXPECT_EQ(f.get_array("t.strs").strings(), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_array("t.i32s").at(1).as_int("x"), -2);
  EXPECT_EQ(f.get_array("t.f32s").at(0).as_float("x"), 0.5);
  EXPECT_EQ(f.get_array("t.u16s").at(1).as_int("x"), 65535);
  ASSERT_EQ(f.tensors().size(), 3u);
  const GgufTensor& ta = f.tensor("a");
  EXPECT_EQ(ta.ne, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(bytes_of(ta.data, 24), bytes_of(a.data(), 24));
  const GgufTensor& tq = f.tensor("q");
  EXPECT_EQ(tq.type, QuantType::Q8_0);
  EXPECT_EQ(tq.offset % 64, 0u);
  EXPECT_EQ(bytes_of(tq.data, size_t(tq.bytes)), q);
  EXPECT_EQ(f.tensor("b").bytes, 10);
  EXPECT_EQ((f.data_offset() + f.tensor("b").offset) % 64, 0u);
}

// Every value type, nested arrays and odd strings among them, copied key by key from a file into another gives the
// same bytes: what attnzoo quantize's GGUF source needs to keep a tokenizer and chat template byte for byte.
TEST(GgufWriter, CopiedValuesKeepTheirBytes) {
  using namespace testing;  // NOLINT: the spec helpers
  Bytes inner;  // [[1, -2], []] as arrays of i16
  {
    Bytes e;
    put<int16_t>(e, 1);
    put<int16_t>(e, -2);
    const Bytes x = array_value(3, 2, e), y = array_value(3, 0, {});
    inner.insert(inner.end(), x.begin(), x.end());
    inner.insert(inner.end(), y.begin(), y.end());
  }
  Bytes strs;
  put_string(strs, std::string("a\0b\xff", 4));
  put_string(strs, "");
  GgufSpec spec;
  spec.kvs = {kv_string("general.architecture", "llama"), kv_scalar<uint8_t>("u8", 0, 200),
              kv_scalar<int16_t>("i16", 3, -30000), kv_scalar<uint64_t>("u64", 10, 1ull << 60),
              kv_scalar<float>("f32", 6, -0.0f), kv_scalar<double>("f64", 12, 1e300),
              kv_scalar<uint8_t>("bool", 7, 1), kv_string("str", std::string("h\xC3\xA9\0", 4)),
              kv_array("strs", 8, 2, strs), kv_array("nested", 9, 2, inner)};
  Bytes data(128);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7);
  spec.tensors = {{"t", {32}, 0, data, std::nullopt}};
  ScratchDir dir;
  const std::string a = (dir.path() / "a.gguf").string(), b = (dir.path() / "b.gguf").string();
  { std::ofstream(a, std::ios::binary).write(reinterpret_cast<const char*>(gguf_bytes(spec).data()),
                                             std::streamsize(gguf_bytes(spec).size())); }
  {
    const GgufFile src = GgufFile::open(a);
    GgufWriter copy;
    for (const auto& [key, value] : src.metadata()) copy.add_value(key, value);
    const GgufTensor& t = src.tensor("t");
    copy.add_tensor("t", t.ne, t.type, [&] { return std::vector<uint8_t>(t.data, t.data + t.bytes); });
    copy.write(b);
  }
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  const std::string da((std::istreambuf_iterator<char>(fa)), {}), db((std::istreambuf_iterator<char>(fb)), {});
  EXPECT_EQ(da.size(), gguf_bytes(spec).size());
  EXPECT_EQ(da, db);
}

TEST(GgufWriter, MistakesAreNamedAndLeaveNoFile) {
  ScratchDir dir;
  const std::string path = (dir.path() / "bad.gguf").string();
  auto message = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  GgufWriter w;
  w.add_u32("k", 1);
  EXPECT_NE(message([&] { w.add_string("k", "x"); }).find("key 'k' set twice"), std::string::npos);
  EXPECT_NE(message([&] { w.add_tensor("t", {33}, QuantType::Q8_0, {}); }).find("rows of 33 values are not whole Q8_0"),
            std::string::npos);
  EXPECT_NE(message([&] { w.add_tensor("t", {1, 2, 3, 4, 5}, QuantType::F32, {}); }).find("1 to 4 dimensions"),
            std::string::npos);
  EXPECT_THROW(GgufWriter(24), ArgumentError);
  w.add_tensor("t", {4}, QuantType::F32, [] { return std::vector<uint8_t>(15); });
  EXPECT_NE(message([&] { w.write(path); }).find("tensor 't': produced 15 bytes, its shape and type F32 take 16"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  EXPECT_NE(message([&] { w.write((dir.path() / "no" / "such" / "x.gguf").string()); }).find("cannot open for writing"),
            std::string::npos);
}

TEST(GgufWriter, RefusesAnAlignmentReadersCannotHold) {
  EXPECT_NO_THROW(GgufWriter(uint64_t(1) << 31));
  EXPECT_NO_THROW(GgufWriter(1));
  for (uint64_t bad : {uint64_t(0), uint64_t(48), uint64_t(1) << 32, uint64_t(1) << 63}) {
    try {
      GgufWriter w(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("alignment: expected a power of two in [1, 2^31], got " + std::to_string(bad)),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(GgufWriter, FirstIntReadsBackIntegerKeys) {
  GgufWriter w;
  w.add_u32("a.block_count", 24);
  w.add_i64("a.big", -5000000000LL);
  w.add_u8("a.small", 200);
  w.add_i32_array("a.head_count_kv", {0, 8, 0});
  w.add_i32_array("a.empty", {});
  w.add_f32("a.eps", 1e-6f);
  w.add_string("a.name", "x");
  EXPECT_EQ(w.first_int("a.block_count"), 24);
  EXPECT_EQ(w.first_int("a.big"), -5000000000LL);
  EXPECT_EQ(w.first_int("a.small"), 200);
  EXPECT_EQ(w.first_int("a.head_count_kv"), 0);  // an array: its first element
  EXPECT_EQ(w.first_int("a.empty"), std::nullopt);
  EXPECT_EQ(w.first_int("a.eps"), std::nullopt);
  EXPECT_EQ(w.first_int("a.name"), std::nullopt);
  EXPECT_EQ(w.first_int("a.absent"), std::nullopt);
}

}  // namespace
}  // namespace attnzoo
