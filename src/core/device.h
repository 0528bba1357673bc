#pragma once
// Where memory lives and where a kernel runs: the one seam between the CPU build and the CUDA one.
// Tensors carry a Device; each kernel family's public entry validates on the host (shapes, lengths, options are
// host metadata, as a FlashInfer plan is), then branches once on the device. Everything here exists in both
// builds: without CUDA the queries answer "none" and the allocations throw a DeviceError that says how to build
// with it, so callers need no #if of their own.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attnzoo {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0"
};

// "cpu", "cuda", "cuda:N"; anything else is an ArgumentError naming `argument`.
Device parse_device(const std::string& text, const char* argument);

// True when this library was compiled with its CUDA kernels (whether or not a GPU is present).
bool cuda_built();
// GPUs the CUDA driver reports; 0 without CUDA, without a driver, or without a device.
int cuda_device_count();
// Why cuda_device_count() is 0 ("built without CUDA", the driver's message), or "" when it is not.
std::string cuda_unavailable_reason();

struct CudaDeviceInfo {
  std::string name;
  int sm_major = 0, sm_minor = 0;
  int multiprocessors = 0;
  size_t memory_bytes = 0;
};
// DeviceError when `index` is not a present device.
CudaDeviceInfo cuda_device_info(int index);

// A CUDA stream as an opaque handle (cudaStream_t); null is the device's legacy default stream. Work on a
// stream is ordered; the host waits only in synchronize() and in copies to pageable host memory.
struct Stream {
  void* handle = nullptr;
};

// The stream this thread's kernel launches go to (an engine sets its own; the Python module the caller's
// torch stream). StreamGuard sets it for a scope.
Stream current_stream();
class StreamGuard {
 public:
  explicit StreamGuard(Stream s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

// Makes `device` the calling thread's current CUDA device for a scope and restores the caller's afterwards (the
// runtime's current device is per thread and belongs to the caller). Nothing on a CPU device.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;  // -1: nothing to restore
};

// Waits for everything queued on `s`; raises the first asynchronous error of the device as a DeviceError.
void synchronize(Stream s);

// Raw memory of `bytes` on `device`: 64-byte aligned on the CPU, cudaMalloc's alignment (256) on a GPU.
void* device_alloc(Device device, size_t bytes);
void device_free(Device device, void* ptr) noexcept;
// Copies `bytes` between any two devices, ordered on `s`. A copy into host memory waits for it to land.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes, Stream s);
// Sets `bytes` bytes at `dst` on `device` to zero, ordered on `s`.
void zero_bytes(void* dst, Device device, size_t bytes, Stream s);
// Free and total memory of GPU `index` now (cudaMemGetInfo): what a memory pool sized as a fraction of the device
// (vLLM's gpu_memory_utilization) is cut from. DeviceError when `index` is not a present device.
struct CudaMemoryInfo {
  size_t free_bytes = 0, total_bytes = 0;
};
CudaMemoryInfo cuda_memory_info(int index);

// Seconds of each of `reps` runs of `launch` (after `warmup` untimed ones), timed by CUDA events recorded on
// `s` around each run: the device's own clock, so launch overhead hidden behind queued work is not counted.
std::vector<double> time_on_stream(const std::function<void()>& launch, Stream s, int warmup, int reps);

// Owning memory on one device (the AlignedBuffer of any device): what a device-side tensor's data points into.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device device, size_t bytes) : device_(device), bytes_(bytes), data_(device_alloc(device, bytes)) {}
  ~DeviceBuffer() { device_free(device_, data_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    swap(o);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T> T* as() const { return static_cast<T*>(data_); }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

  void upload(const void* host, size_t bytes, Stream s = current_stream()) const;
  void download(void* host, size_t bytes, Stream s = current_stream()) const;

 private:
  void swap(DeviceBuffer& o) noexcept {
    std::swap(device_, o.device_);
    std::swap(bytes_, o.bytes_);
    std::swap(data_, o.data_);
  }
  Device device_{};
  size_t bytes_ = 0;
  void* data_ = nullptr;
};

}  // namespace attnzoo
