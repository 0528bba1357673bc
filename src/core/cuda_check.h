#pragma once
// For the CUDA-built files only (core/device.cc and the kernels' .cu host sides): how a CUDA runtime error
// becomes the project's DeviceError, and the stream-ordered scratch every launcher uploads its host metadata to
// (work lists, cu_seqlens, block tables, sinks), so neither is written once per launcher.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "core/error.h"

namespace attnzoo {

inline void cuda_check(cudaError_t err, const char* call) {
  if (err != cudaSuccess) throw DeviceError(std::string(call) + ": " + cudaGetErrorString(err));
}

// Device bytes that live as long as the launches queued on `stream` after it: allocated and freed in stream
// order (cudaMallocAsync / cudaFreeAsync), so the free waits for the kernels without a host synchronize. An
// exception between the two frees it on the way out; finish() frees it on the normal path and reports a failure.
class StreamScratch {
 public:
  StreamScratch(size_t bytes, cudaStream_t stream) : stream_(stream) {
    cuda_check(cudaMallocAsync(&ptr_, bytes, stream), "cudaMallocAsync");
  }
  ~StreamScratch() {
    if (ptr_) cudaFreeAsync(ptr_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;

  unsigned char* data() const { return static_cast<unsigned char*>(ptr_); }
  // From pageable host memory this returns once the bytes are staged, so `host` may go right after.
  void upload(const void* host, size_t bytes) {
    cuda_check(cudaMemcpyAsync(ptr_, host, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
  }
  void finish() {
    void* p = ptr_;
    ptr_ = nullptr;
    cuda_check(cudaFreeAsync(p, stream_), "cudaFreeAsync");
  }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace attnzoo
