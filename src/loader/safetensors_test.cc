#include "loader/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loader/test_files.h"
#include "loader/testdata/python_fixture.h"

namespace attnzoo {
namespace {

using testing::raw_tensor;
using testing::RawTensor;
using testing::safetensors_bytes;

SafetensorsFile from_bytes(std::vector<uint8_t> bytes, std::string name = "mem.safetensors") {
  return SafetensorsFile::parse(MappedFile::from_bytes(std::move(bytes), std::move(name)));
}

// Asserts that parsing fails with LoadError and that the message contains every fragment.
void expect_load_error(std::vector<uint8_t> bytes, std::initializer_list<std::string> fragments) {
  try {
    from_bytes(std::move(bytes), "bad.safetensors");
    ADD_FAILURE() << "accepted a bad file";
  } catch (const LoadError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad.safetensors"), std::string::npos) << what;
    for (const std::string& f : fragments) EXPECT_NE(what.find(f), std::string::npos) << "missing '" << f << "' in: " << what;
  }
}

std::vector<uint8_t> header_only(const std::string& header, size_t data_bytes) {
  return safetensors_bytes(header, std::vector<uint8_t>(data_bytes, 0));
}

TEST(Safetensors, RoundTripsEveryViewDType) {
  std::vector<float> f32 = {1.f, -2.5f, 3.25f, 0.f, 1e-3f, -7.f};
  std::vector<uint16_t> bf16 = {f32_to_bf16(1.5f), f32_to_bf16(-0.25f), f32_to_bf16(8.f)};
  std::vector<uint16_t> f16 = {f32_to_f16(0.5f), f32_to_f16(-3.f)};
  std::vector<int32_t> i32 = {-1, 2, 2147483647};
  std::vector<int64_t> i64 = {INT64_MIN, 5};
  std::vector<uint8_t> u8 = {0, 255, 7};
  // Widest elements first, as the reference writer lays them out, so every tensor is aligned.
  std::vector<RawTensor> tensors = {
      raw_tensor("i.i64", "I64", {2}, i64),         raw_tensor("w.f32", "F32", {2, 3}, f32),
      raw_tensor("i.i32", "I32", {3}, i32),         raw_tensor("scalar", "F32", {}, std::vector<float>{42.f}),
      raw_tensor("empty", "F32", {0, 5}, std::vector<float>{}),
      raw_tensor("w.bf16", "BF16", {3}, bf16),      raw_tensor("w.f16", "F16", {1, 2}, f16),
      raw_tensor("i.u8", "U8", {3, 1}, u8),
  };
  SafetensorsFile f = from_bytes(safetensors_bytes(tensors, {{"format", "pt"}}));
  ASSERT_EQ(f.tensors().size(), tensors.size());
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.total_bytes(), 24u + 6 + 4 + 12 + 16 + 3 + 4 + 0);

  TensorView v = f.view("w.f32");
  EXPECT_EQ(v.dtype, DType::f32);
  ASSERT_EQ(v.ndim, 2);
  EXPECT_EQ(v.shape[0], 2);
  EXPECT_EQ(v.shape[1], 3);
  EXPECT_EQ(v.strides[0], 3);
  EXPECT_EQ(v.strides[1], 1);
  EXPECT_TRUE(v.is_contiguous());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(v.ptr<float>()[i], f32[size_t(i)]);
  // Zero copy: the view points into the bytes the file object holds.
  const uint8_t* base = f.mapping()->data();
  EXPECT_GE(static_cast<const uint8_t*>(v.data), base);
  EXPECT_LT(static_cast<const uint8_t*>(v.data), base + f.mapping()->size());

  EXPECT_EQ(f.view("w.bf16").dtype, DType::bf16);
  EXPECT_EQ(bf16_to_f32(f.view("w.bf16").ptr<uint16_t>()[1]), -0.25f);
  EXPECT_EQ(f16_to_f32(f.view("w.f16").ptr<uint16_t>()[1]), -3.f);
  EXPECT_EQ(f.view("i.i32").ptr<int32_t>()[2], 2147483647);
  EXPECT_EQ(f.view("i.i64").ptr<int64_t>()[0], INT64_MIN);
  EXPECT_EQ(f.view("i.u8").ptr<uint8_t>()[1], 255);
  EXPECT_EQ(f.view("i.u8").shape_str(), "[3, 1]");
  TensorView s = f.view("scalar");
  EXPECT_EQ(s.ndim, 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(*s.ptr<float>(), 42.f);
  EXPECT_EQ(f.view("empty").numel(), 0);
  EXPECT_EQ(f.info("empty").shape, (std::vector<int64_t>{0, 5}));
}

TEST(Safetensors, ReadsFileWrittenByReferenceWriter) {
  std::vector<uint8_t> bytes(std::begin(testdata::kPythonFixture), std::end(testdata::kPythonFixture));
  SafetensorsFile f = from_bytes(bytes, "python_fixture.safetensors");
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("note"), "attnzoo fixture");
  auto value = [](int64_t i) { return double(i) * 0.25 - 3; };  // the generator's formula
  auto ivalue = [](int64_t i) { return i * 7 - 20; };

  struct FloatCase { const char* name; DType dtype; std::vector<int64_t> shape; };
  for (const FloatCase& c : {FloatCase{"model.embed.weight", DType::f32, {3, 5}},
                             FloatCase{"model.layers.0.q_proj.weight", DType::bf16, {4, 3}},
                             FloatCase{"model.layers.0.k_proj.weight", DType::f16, {2, 3}},
                             FloatCase{"model.scalar", DType::f32, {}}}) {
    SCOPED_TRACE(c.name);
    TensorView v = f.view(c.name);
    EXPECT_EQ(v.dtype, c.dtype);
    ASSERT_EQ(v.ndim, int(c.shape.size()));
    for (int d = 0; d < v.ndim; ++d) EXPECT_EQ(v.shape[d], c.shape[size_t(d)]);
    for (int64_t i = 0; i < v.numel(); ++i) {
      // Every value is a multiple of 1/4 below 2^8, exact in all three dtypes.
      EXPECT_EQ(load_as_f32(v.data, v.dtype, i), float(value(i))) << "element " << i;
    }
  }
  TensorView pos = f.view("model.positions");
  ASSERT_EQ(pos.dtype, DType::i64);
  for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(pos.ptr<int64_t>()[i], ivalue(i));
  TensorView ids = f.view("model.ids");
  ASSERT_EQ(ids.dtype, DType::i32);
  EXPECT_EQ(ids.shape_str(), "[2, 2, 2]");
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(ids.ptr<int32_t>()[i], ivalue(i));
  TensorView mask = f.view("model.mask");
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(mask.ptr<uint8_t>()[i], uint8_t(ivalue(i)));
  EXPECT_EQ(f.view("model.empty").numel(), 0);

  // F64 is recognised but has no attnzoo dtype: views refuse with a type error, raw bytes are available.
  EXPECT_EQ(f.info("model.double").dtype, FileDType::F64);
  EXPECT_THROW(f.view("model.double"), DTypeError);
  double d[2];
  std::memcpy(d, f.data("model.double"), sizeof d);
  EXPECT_EQ(d[0], value(0));
  EXPECT_EQ(d[1], value(1));
}

TEST(Safetensors, OpensFromDiskAndMappingOutlivesFileObject) {
  testing::ScratchDir dir;
  const auto path = dir.path() / "m.safetensors";
  std::vector<float> values = {1, 2, 3, 4};
  testing::write_file(path, safetensors_bytes({raw_tensor("x", "F32", {4}, values)}));
  TensorView v;
  std::shared_ptr<const MappedFile> keep;
  {
    SafetensorsFile f = SafetensorsFile::open(path.string());
    EXPECT_EQ(f.path(), path.string());
    v = f.view("x");
    keep = f.mapping();
  }
  std::filesystem::remove(path);  // the mapping keeps the pages
  for (int i = 0; i < 4; ++i) EXPECT_EQ(v.ptr<float>()[i], values[size_t(i)]);
}

TEST(Safetensors, MissingTensorAndMissingFileNamed) {
  SafetensorsFile f = from_bytes(safetensors_bytes({raw_tensor("x", "F32", {1}, std::vector<float>{1})}));
  EXPECT_FALSE(f.has("y"));
  EXPECT_EQ(f.find("y"), nullptr);
  try {
    f.view("y");
    FAIL();
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("'y'"), std::string::npos) << e.what();
  }
  try {
    SafetensorsFile::open("/nonexistent/dir/w.safetensors");
    FAIL();
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/w.safetensors"), std::string::npos) << e.what();
  }
  testing::ScratchDir dir;
  EXPECT_THROW(SafetensorsFile::open(dir.str()), LoadError);  // a directory
  testing::write_file(dir.path() / "empty", std::vector<uint8_t>{});
  EXPECT_THROW(SafetensorsFile::open((dir.path() / "empty").string()), LoadError);
}

TEST(Safetensors, RejectsBrokenContainer) {
  expect_load_error({}, {"too short"});
  expect_load_error({1, 0, 0}, {"too short"});
  std::vector<uint8_t> huge(16, ' ');
  uint64_t n = (200ull << 20);
  std::memcpy(huge.data(), &n, 8);
  expect_load_error(huge, {"over the"});
  std::vector<uint8_t> past = safetensors_bytes("{}", {});
  n = 64;
  std::memcpy(past.data(), &n, 8);
  expect_load_error(past, {"runs past the end"});
  n = ~0ull;  // would overflow 8 + n
  std::memcpy(past.data(), &n, 8);
  expect_load_error(past, {"header length"});
  expect_load_error(header_only("[1,2]", 0), {"expected an object"});
  expect_load_error(header_only("{\"a\":", 0), {"invalid JSON at file byte"});
  expect_load_error(header_only("{\"\xFF\":1}", 0), {"invalid UTF-8"});
}

TEST(Safetensors, RejectsBadEntriesNamingTheTensor) {
  const std::string ok_tail = R"("shape":[2],"data_offsets":[0,8]}})";
  expect_load_error(header_only(R"({"t":{"dtype":"F33",)" + ok_tail, 8), {"'t'", "unknown dtype \"F33\""});
  expect_load_error(header_only(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), {"'t'", "non-negative"});
  expect_load_error(header_only(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8), {"'t'"});
  expect_load_error(header_only(R"({"t":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", 8), {"'t'", "shape"});
  expect_load_error(header_only(R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", 8), {"'t'", "shape"});
  expect_load_error(header_only(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", 8), {"'t'", "dtype"});
  expect_load_error(header_only(R"({"t":{"dtype":"F32","shape":[2]}})", 8), {"'t'", "data_offsets"});
  expect_load_error(header_only(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8), {"'t'", "data_offsets"});
  expect_load_error(header_only(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,-8]}})", 8), {"'t'", "non-negative"});
  expect_load_error(header_only(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), {"'t'", "end before begin"});
  expect_load_error(header_only(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), {"'t'", "need 12"});
  expect_load_error(header_only(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 7), {"'t'", "truncated"});
  expect_load_error(header_only(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 12), {"'t'", "past the data"});
  expect_load_error(header_only(R"({"t":7})", 0), {"'t'", "expected an object"});
  // Products that overflow 64 bits, in elements and in bytes.
  expect_load_error(header_only(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0),
                    {"'t'", "64 bits"});
  expect_load_error(header_only(R"({"t":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0),
                    {"'t'", "64 bits"});
  // A zero in the shape makes any other extent harmless.
  EXPECT_NO_THROW(from_bytes(header_only(R"({"t":{"dtype":"F32","shape":[0,9223372036854775807],"data_offsets":[0,0]}})", 0)));
}

TEST(Safetensors, RejectsOverlapAndDuplicates) {
  expect_load_error(header_only(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
                    {"'b'", "overlaps tensor 'a'"});
  expect_load_error(header_only(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16),
                    {"duplicate key \"a\""});
  // Adjacent and empty tensors do not overlap.
  EXPECT_NO_THROW(from_bytes(header_only(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                         R"("b":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                                         R"("c":{"dtype":"U8","shape":[2],"data_offsets":[8,10]}})", 10)));
}

TEST(Safetensors, MetadataMustBeStrings) {
  expect_load_error(header_only(R"({"__metadata__":{"k":1}})", 0), {"__metadata__", "\"k\""});
  expect_load_error(header_only(R"({"__metadata__":[]})", 0), {"__metadata__"});
}

TEST(Safetensors, UnalignedDataRefusedByView) {
  // A header padded to an odd length puts the data at an odd address; raw bytes still work.
  std::string header = R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::vector<uint8_t> bytes(8);
  header += ' ';
  if ((header.size() + 8) % 2 == 0) header += ' ';
  uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes.insert(bytes.end(), header.begin(), header.end());
  float one = 1.f;
  bytes.insert(bytes.end(), reinterpret_cast<uint8_t*>(&one), reinterpret_cast<uint8_t*>(&one) + 4);
  SafetensorsFile f = from_bytes(bytes);
  EXPECT_THROW(f.view("t"), LoadError);
  float back;
  std::memcpy(&back, f.data("t"), 4);
  EXPECT_EQ(back, 1.f);
}

TEST(Safetensors, TooManyDimsForAView) {
  SafetensorsFile f = from_bytes(header_only(R"({"t":{"dtype":"U8","shape":[1,1,1,1,1,1,2],"data_offsets":[0,2]}})", 2));
  EXPECT_EQ(f.info("t").numel(), 2);
  EXPECT_THROW(f.view("t"), LoadError);
}

}  // namespace
}  // namespace attnzoo
