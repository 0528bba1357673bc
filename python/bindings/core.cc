#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

#include "bench/blas_class.h"
#include "bindings.h"
#include "core/bf16_dot.h"
#include "core/cpu_info.h"
#include "core/amx.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/threads.h"

namespace attnzoo::py {
namespace {

DType dtype_of(nb::dlpack::dtype t, const char* name) {
  using code = nb::dlpack::dtype_code;
  if (t.lanes == 1) {
    if (t.code == uint8_t(code::Float) && t.bits == 32) return DType::f32;
    if (t.code == uint8_t(code::Float) && t.bits == 16) return DType::f16;
    if (t.code == uint8_t(code::Bfloat) && t.bits == 16) return DType::bf16;
    if (t.code == uint8_t(code::Int) && t.bits == 32) return DType::i32;
    if (t.code == uint8_t(code::Int) && t.bits == 64) return DType::i64;
    if (t.code == uint8_t(code::UInt) && t.bits == 8) return DType::u8;
    if (t.code == uint8_t(code::Int) && t.bits == 8) return DType::i8;
  }
  // Named as numpy / torch name it (float64 is what a plain Python list of floats becomes).
  std::string family = "dtype code " + std::to_string(t.code) + ", bits ";
  if (t.code == uint8_t(code::Float)) family = "float";
  else if (t.code == uint8_t(code::Int)) family = "int";
  else if (t.code == uint8_t(code::UInt)) family = "uint";
  else if (t.code == uint8_t(code::Bfloat)) family = "bfloat";
  else if (t.code == uint8_t(code::Complex)) family = "complex";
  else if (t.code == uint8_t(code::Bool)) family = "bool";
  // DLPack's narrow float codes, named as torch names the dtypes (float8_e4m3fn is code 10, not "dtype code 10").
  static constexpr const char* kNarrow[] = {"float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
                                            "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
                                            "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"};
  const bool narrow = t.code >= 7 && t.code <= 17;
  std::string dtype = narrow ? kNarrow[t.code - 7]
                             : family == "bool" ? family : family + std::to_string(t.bits);
  if (t.lanes != 1) dtype += "x" + std::to_string(t.lanes);
  throw DTypeError(std::string(name) + ": " + dtype +
                   " is not supported; use float32, bfloat16 or float16 (int32 / int64 for ids and offsets)" +
                   (narrow ? "; an fp8 KV cache is passed as its uint8 bytes with kv_cache_dtype='fp8'" : ""));
}

// Whether the process may store to `p`, asked of the kernel instead of by storing: a pipe carries the byte that
// is already there back onto it, and read() answers EFAULT for memory this process cannot write. One pipe per
// thread, made once.
bool can_write_byte(char* p) {
  struct Pipe {
    int fds[2] = {-1, -1};
    Pipe() {
      // Non-blocking: the drain below must not wait should a kernel have consumed a byte it could not store.
      if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) fds[0] = fds[1] = -1;
    }
    ~Pipe() {
      if (fds[0] >= 0) close(fds[0]), close(fds[1]);
    }
  };
  thread_local Pipe pipe_;
  if (pipe_.fds[0] < 0) return true;  // cannot tell: let the store decide
  ssize_t n;
  do n = write(pipe_.fds[1], p, 1); while (n < 0 && errno == EINTR);
  if (n != 1) return false;  // not even readable
  do n = read(pipe_.fds[0], p, 1); while (n < 0 && errno == EINTR);
  if (n == 1) return true;
  // The byte is still in the pipe: drained here, or the next probe would read it back over its own byte.
  char drop;
  do n = read(pipe_.fds[0], &drop, 1); while (n < 0 && errno == EINTR);
  return false;
}

// Probes the first and last byte the view spans (a read-only mapping is read-only throughout): four system
// calls, about 2 us, per output per call. No cache: freed memory can come back at the same address read-only.
void require_writable(const TensorView& v, const char* name) {
  if (v.empty()) return;
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < v.ndim; ++d) {
    if (v.shape[size_t(d)] == 0) return;
    const int64_t reach = (v.shape[size_t(d)] - 1) * v.strides[size_t(d)];
    (reach < 0 ? lo : hi) += reach;
  }
  char* base = static_cast<char*>(v.data);
  const int64_t esize = int64_t(dtype_size(v.dtype));
  require(can_write_byte(base + lo * esize) && can_write_byte(base + hi * esize + esize - 1), name,
          "is read-only memory (written in place); pass a writable array");
}

// An output whose elements share memory (a broadcast view: stride 0 along a dimension of more than one) would have
// its rows written over each other, by several threads at once: refused, as torch refuses such an out=.
void require_distinct_elements(const TensorView& v, const char* name) {
  for (int d = 0; d < v.ndim; ++d)
    if (v.shape[size_t(d)] == 0) return;  // no elements (numpy gives such arrays stride 0 along their other dims)
  for (int d = 0; d < v.ndim; ++d)
    require(v.strides[size_t(d)] != 0 || v.shape[size_t(d)] <= 1, name,
            "has elements that share memory (stride 0 along dimension " + std::to_string(d) +
                ", an expanded view); pass an array with memory of its own, e.g. .contiguous()");
}

template <typename Array>
TensorView view_of(const Array& a, const char* name) {
  require(a.ndim() <= size_t(TensorView::kMaxDims), name, "has more than 6 dimensions");
  TensorView v;
  v.data = const_cast<void*>(static_cast<const void*>(a.data()));
  v.dtype = dtype_of(a.dtype(), name);
  v.ndim = int(a.ndim());
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[size_t(d)] = int64_t(a.shape(size_t(d)));
    v.strides[size_t(d)] = int64_t(a.stride(size_t(d)));
  }
  // torch gives a tensor with no elements a null data pointer, which a view reads as an absent optional argument:
  // an empty cu_seqlens or initial_state would be ignored instead of checked. Such a view points at a byte no
  // kernel reads (there are no elements to read).
  alignas(64) static char no_elements;
  if (v.data == nullptr && v.numel() == 0) v.data = &no_elements;
  if (a.device_type() == nb::device::cuda::value) {
    v.device = Device::cuda(a.device_id());
  } else {
    require(a.device_type() == nb::device::cpu::value, name,
            "lives on DLPack device type " + std::to_string(a.device_type()) + "; attnzoo reads host (CPU) or CUDA memory");
  }
  return v;
}

}  // namespace

TensorView as_view(const AnyArray& a, const char* name) { return view_of(a, name); }
TensorView as_view(const OutArray& a, const char* name) {
  TensorView v = view_of(a, name);
  require_distinct_elements(v, name);
  require_writable(v, name);
  return v;
}
TensorView as_view(const DeviceArray& a, const char* name) { return view_of(a, name); }
TensorView as_view(const DeviceOutArray& a, const char* name) {
  TensorView v = view_of(a, name);
  require_distinct_elements(v, name);
  if (v.device.is_cpu()) require_writable(v, name);  // the probe reads host addresses
  return v;
}

const int32_t* as_int32(const AnyArray& a, const char* name, int64_t expected_len) {
  const TensorView v = as_view(a, name);
  if (v.dtype != DType::i32) throw DTypeError(std::string(name) + ": expected int32, got " + dtype_name(v.dtype));
  require(v.ndim == 1, name, "must be 1-D, got " + v.shape_str());
  require(v.is_contiguous(), name, "must be contiguous");
  if (expected_len >= 0)
    require(v.shape[0] == expected_len, name, "must have " + std::to_string(expected_len) + " entries, got " +
                                                  std::to_string(v.shape[0]));
  return v.ptr<int32_t>();
}

std::pair<const int32_t*, int64_t> seqlens_of(const std::optional<AnyArray>& cu_seqlens) {
  if (!cu_seqlens) return {nullptr, 0};
  const int32_t* p = as_int32(*cu_seqlens, "cu_seqlens");
  return {p, int64_t(cu_seqlens->shape(0))};
}

const int32_t* as_block_table(const AnyArray& a, int64_t rows, int64_t* cols) {
  const TensorView v = as_view(a, "block_table");
  if (v.dtype != DType::i32) throw DTypeError(std::string("block_table: expected int32, got ") + dtype_name(v.dtype));
  require(v.ndim == 2, "block_table", "must be 2-D [batch, max_blocks_per_seq], got " + v.shape_str());
  require(v.shape[0] == rows, "block_table", "has " + std::to_string(v.shape[0]) + " rows for " +
                                                 std::to_string(rows) + " sequences");
  require(v.is_contiguous(), "block_table", "must be contiguous");
  *cols = v.shape[1];
  return v.ptr<int32_t>();
}

TensorView as_kv_cache(TensorView cache, const std::string& kv_cache_dtype, const char* name) {
  if (kv_cache_dtype == "auto") return cache;
  if (kv_cache_dtype == "int8") {
    if (cache.dtype != DType::i8)
      throw DTypeError(std::string(name) + ": kv_cache_dtype 'int8' needs an int8 array, got " + dtype_name(cache.dtype));
  } else if (kv_cache_dtype == "fp8" || kv_cache_dtype == "fp8_e4m3") {
    if (cache.dtype != DType::u8)
      throw DTypeError(std::string(name) + ": kv_cache_dtype 'fp8' needs a uint8 array of e4m3 bytes, got " +
                       dtype_name(cache.dtype));
    cache.dtype = DType::f8_e4m3;
  } else {
    throw ArgumentError("kv_cache_dtype: expected 'auto', 'int8' or 'fp8', got '" + kv_cache_dtype + "'");
  }
  return cache;
}

void refuse_quant_without_cache(bool has_k_scale, bool has_v_scale,
                                const std::string& kv_cache_dtype, const char* cache_arg) {
  const std::string why = std::string("is only used with a quantized KV cache (pass ") + cache_arg + ")";
  require(!has_k_scale, "k_scale", why);
  require(!has_v_scale, "v_scale", why);
  require(kv_cache_dtype == "auto", "kv_cache_dtype", why);
}

namespace {

// A contiguous 1-D array of `want` with exactly `expected_len` entries.
TensorView exact_vector(const AnyArray& a, const char* name, DType want, int64_t expected_len) {
  const TensorView v = as_view(a, name);
  if (v.dtype != want)
    throw DTypeError(std::string(name) + ": expected " + dtype_name(want) + ", got " + dtype_name(v.dtype));
  require(v.ndim == 1 && v.shape[0] == expected_len, name,
          "must be 1-D with " + std::to_string(expected_len) + " entries, got " + v.shape_str());
  require(v.is_contiguous(), name, "must be contiguous");
  return v;
}

}  // namespace

const int64_t* as_int64(const AnyArray& a, const char* name, int64_t expected_len) {
  return exact_vector(a, name, DType::i64, expected_len).ptr<int64_t>();
}

const float* as_f32_vector(const AnyArray& a, const char* name, int64_t expected_len) {
  return exact_vector(a, name, DType::f32, expected_len).ptr<float>();
}

void bind_core(nb::module_& m) {
  m.def("supported_targets", [] {
    std::vector<std::string> out;
    for (Target t : supported_targets()) out.push_back(target_name(t));
    return out;
  }, "SIMD targets this CPU and build can run, best first.");
  m.def("active_target", [] { return std::string(target_name(active_target())); });
  m.def("set_target", [](const std::string& name) { set_target(name); }, nb::arg("name"),
        "Force a SIMD target: scalar, avx2, avx512 or avx512_bf16.");
  m.def("bf16_dot_enabled", [] { return bf16_dot_enabled(); },
        "True when bf16 products run on vdpbf16ps (the avx512_bf16 target and the vendor rule / ATTNZOO_BF16_DOT).");
  m.def("amx_bf16_enabled", [] { return amx_bf16_enabled(); },
        "True when bf16 products run on AMX tiles (the CPU and OS have them, ATTNZOO_AMX is not 0, avx512_bf16 "
        "active).");
  m.def("bf16_tiles_enabled", [] { return bf16_tiles_enabled(); },
        "True when reduced-precision products run as bf16 (AMX tiles, or vdpbf16ps where bf16_dot_enabled()).");
  m.def("bf16_tiles_engine", []() -> std::optional<std::string> {
    const char* e = bf16_tiles_engine();
    return e ? std::optional<std::string>(e) : std::nullopt;
  }, "The engine of bf16 products: 'AMX tiles', 'vdpbf16ps', or None where they widen to f32.");
  m.def("bf16_dot_preference", [](const std::string& vendor, std::optional<std::string> env) {
    const Bf16DotPreference p = bf16_dot_preference(vendor, env ? env->c_str() : nullptr);
    return std::make_pair(p.use, p.reason);
  }, nb::arg("vendor"), nb::arg("env").none(), "The vendor / ATTNZOO_BF16_DOT rule, pure: (use, reason).");
  m.def("num_threads", [] { return ThreadPool::global().num_threads(); });
  m.def("set_num_threads", [](int n) {
    nb::gil_scoped_release release;  // waits for running kernels, which may need the GIL to finish
    ThreadPool::set_global_threads(n);
  }, nb::arg("n"), "Resizes the thread pool; waits until kernels running on other threads have returned.");
  m.def("cpu_info", [] {
    const CpuInfo c = read_cpu_info();
    nb::dict d;
    d["model"] = c.model;
    d["vendor"] = c.vendor;
    d["family"] = c.family;
    d["model_number"] = c.model_number;
    d["microarchitecture"] = microarchitecture(c);
    d["description"] = describe_cpu(c);
    d["logical_cpus"] = c.logical_cpus;
    d["l1d_bytes"] = c.l1d_bytes;
    d["l2_bytes"] = c.l2_bytes;
    d["l3_bytes"] = c.l3_bytes;
    return d;
  });
  m.def("blas_info", [] {
    const BlasCoreChoice& choice = configure_blas();
    const BlasKernel k = blas_kernel();
    nb::dict d;
    d["config"] = k.config;
    d["core"] = k.core;
    d["detected"] = choice.detected;
    d["selected"] = choice.selected;
    d["note"] = bench::blas_class_note(k.core, active_target(), std::getenv("OPENBLAS_CORETYPE"));
    d["choice_note"] = bench::blas_choice_note(choice);
    return d;
  }, "OpenBLAS's build and the core whose kernels it runs; 'detected' the core it chose itself, 'selected' the one "
     "attnzoo switched it to off a fallback ('' when kept); 'note' says when the kernels are narrower than the "
     "target, 'choice_note' what attnzoo switched.");
}

}  // namespace attnzoo::py
