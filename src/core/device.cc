// The device seam's host side. The only file of the library that includes the CUDA runtime outside the
// kernels' own .cu files; without CUDA (ATTNZOO_WITH_CUDA unset) every device call says how to get it.
#include "core/device.h"
#include "core/device_unreachable.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

#if ATTNZOO_WITH_CUDA
#include "core/cuda_check.h"
#endif

namespace attnzoo {

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

Device parse_device(const std::string& text, const char* argument) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() <= 8) {
    int index = 0;
    for (char c : text.substr(5)) {
      require(c >= '0' && c <= '9', argument, "expected cpu, cuda or cuda:N, got '" + text + "'");
      index = index * 10 + (c - '0');
    }
    return Device::cuda(index);
  }
  throw ArgumentError(std::string(argument) + ": expected cpu, cuda or cuda:N, got '" + text + "'");
}

namespace {
thread_local Stream t_current_stream{};

[[maybe_unused]] [[noreturn]] void no_cuda(const char* what) {
  throw DeviceError(std::string(what) + ": attnzoo was built without CUDA (run scripts/cuda_toolchain.sh, then "
                                        "configure again: CMake turns ATTNZOO_CUDA on when it finds the compiler)");
}

#if ATTNZOO_WITH_CUDA
// Named before any runtime call can fail on its own terms (without a driver, cudaGetDevice's error names no
// device).
void require_present(Device device) {
  if (device.index < 0 || device.index >= cuda_device_count())
    throw DeviceError(device.str() + " is not present (" + std::to_string(cuda_device_count()) + " CUDA devices" +
                      (cuda_device_count() ? ")" : ": " + cuda_unavailable_reason() + ")"));
}

// Selects `device` for this thread's CUDA calls (the runtime's current device is per thread).
void use(Device device) {
  require_present(device);
  cuda_check(cudaSetDevice(device.index), "cudaSetDevice");
}
#endif
}  // namespace

Stream current_stream() { return t_current_stream; }

DeviceError device_unreachable(const char* argument, Device device) {
  return DeviceError(std::string(argument) + ": lives on " + device.str() + ", and " + cuda_unavailable_reason());
}
StreamGuard::StreamGuard(Stream s) : previous_(t_current_stream) { t_current_stream = s; }
StreamGuard::~StreamGuard() { t_current_stream = previous_; }

#if ATTNZOO_WITH_CUDA

bool cuda_built() { return true; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver is not a sticky error; clear it so later calls report their own
    return 0;
  }
  return n;
}

std::string cuda_unavailable_reason() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return std::string("no CUDA device: ") + cudaGetErrorString(err);
  }
  return n == 0 ? "no CUDA device" : "";
}

CudaDeviceInfo cuda_device_info(int index) {
  if (index < 0 || index >= cuda_device_count()) {
    const int n = cuda_device_count();
    throw DeviceError("cuda:" + std::to_string(index) + " is not present (" +
                      (n ? std::to_string(n) + " CUDA devices)" : cuda_unavailable_reason() + ")"));
  }
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  return {prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem};
}

DeviceGuard::DeviceGuard(Device device) {
  if (device.is_cpu()) return;
  require_present(device);
  int current = 0;
  cuda_check(cudaGetDevice(&current), "cudaGetDevice");
  if (current == device.index) return;
  use(device);
  previous_ = current;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

void synchronize(Stream s) { cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(s.handle)), "cudaStreamSynchronize"); }

void* device_alloc(Device device, size_t bytes) {
  if (device.is_cpu()) {
    void* p = std::aligned_alloc(64, ((bytes + 63) / 64) * 64 + (bytes == 0 ? 64 : 0));
    if (!p) throw std::bad_alloc();
    return p;
  }
  use(device);
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw DeviceError("cudaMalloc(" + std::to_string(bytes) + " bytes on " + device.str() + "): " + cudaGetErrorString(err));
  }
  return p;
}

void device_free(Device device, void* ptr) noexcept {
  if (!ptr) return;
  if (device.is_cpu()) {
    std::free(ptr);
    return;
  }
  cudaFree(ptr);  // implicitly synchronizes: the memory may still be read by queued work otherwise
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes, Stream s) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const cudaMemcpyKind kind = src_device.is_cpu()   ? cudaMemcpyHostToDevice
                              : dst_device.is_cpu() ? cudaMemcpyDeviceToHost
                                                    : cudaMemcpyDeviceToDevice;
  auto stream = static_cast<cudaStream_t>(s.handle);
  cuda_check(cudaMemcpyAsync(dst, src, bytes, kind, stream), "cudaMemcpyAsync");
  if (dst_device.is_cpu()) cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

void zero_bytes(void* dst, Device device, size_t bytes, Stream s) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    std::memset(dst, 0, bytes);
    return;
  }
  cuda_check(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(s.handle)), "cudaMemsetAsync");
}

CudaMemoryInfo cuda_memory_info(int index) {
  const Device device = Device::cuda(index);
  const DeviceGuard on(device);  // cudaMemGetInfo answers for the current device
  CudaMemoryInfo info;
  cuda_check(cudaMemGetInfo(&info.free_bytes, &info.total_bytes), "cudaMemGetInfo");
  return info;
}

std::vector<double> time_on_stream(const std::function<void()>& launch, Stream s, int warmup, int reps) {
  auto stream = static_cast<cudaStream_t>(s.handle);
  for (int i = 0; i < warmup; ++i) launch();
  std::vector<cudaEvent_t> marks(size_t(reps) + 1);
  for (auto& e : marks) cuda_check(cudaEventCreate(&e), "cudaEventCreate");
  std::vector<double> seconds;
  try {
    cuda_check(cudaEventRecord(marks[0], stream), "cudaEventRecord");
    for (int i = 0; i < reps; ++i) {
      launch();
      cuda_check(cudaEventRecord(marks[size_t(i) + 1], stream), "cudaEventRecord");
    }
    cuda_check(cudaEventSynchronize(marks.back()), "cudaEventSynchronize");
    for (int i = 0; i < reps; ++i) {
      float ms = 0;
      cuda_check(cudaEventElapsedTime(&ms, marks[size_t(i)], marks[size_t(i) + 1]), "cudaEventElapsedTime");
      seconds.push_back(double(ms) * 1e-3);
    }
  } catch (...) {
    for (auto& e : marks) cudaEventDestroy(e);
    throw;
  }
  for (auto& e : marks) cudaEventDestroy(e);
  return seconds;
}

#else  // no CUDA in this build

std::vector<double> time_on_stream(const std::function<void()>&, Stream, int, int) { no_cuda("time_on_stream"); }

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_unavailable_reason() { return "attnzoo was built without CUDA"; }
CudaDeviceInfo cuda_device_info(int index) { no_cuda(("cuda:" + std::to_string(index)).c_str()); }
DeviceGuard::DeviceGuard(Device device) {
  if (!device.is_cpu()) no_cuda(device.str().c_str());
}
DeviceGuard::~DeviceGuard() = default;
void synchronize(Stream) {}

void* device_alloc(Device device, size_t bytes) {
  if (!device.is_cpu()) no_cuda("device_alloc");
  void* p = std::aligned_alloc(64, ((bytes + 63) / 64) * 64 + (bytes == 0 ? 64 : 0));
  if (!p) throw std::bad_alloc();
  return p;
}

void device_free(Device device, void* ptr) noexcept {
  if (device.is_cpu()) std::free(ptr);
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes, Stream) {
  if (!dst_device.is_cpu() || !src_device.is_cpu()) no_cuda("copy_bytes");
  if (bytes) std::memcpy(dst, src, bytes);
}

void zero_bytes(void* dst, Device device, size_t bytes, Stream) {
  if (!device.is_cpu()) no_cuda("zero_bytes");
  if (bytes) std::memset(dst, 0, bytes);
}

CudaMemoryInfo cuda_memory_info(int index) { no_cuda(("cuda:" + std::to_string(index)).c_str()); }

#endif

void DeviceBuffer::upload(const void* host, size_t bytes, Stream s) const {
  require(bytes <= bytes_, "bytes", [&] { return "upload of " + std::to_string(bytes) + " bytes into a buffer of " + std::to_string(bytes_); });
  copy_bytes(data_, device_, host, Device::cpu(), bytes, s);
}

void DeviceBuffer::download(void* host, size_t bytes, Stream s) const {
  require(bytes <= bytes_, "bytes", [&] { return "download of " + std::to_string(bytes) + " bytes from a buffer of " + std::to_string(bytes_); });
  copy_bytes(host, Device::cpu(), data_, device_, bytes, s);
}

}  // namespace attnzoo
