#pragma once
// Flush-to-zero / denormals-are-zero for the duration of kernel work.
//
// Exp-decay kernels (Mamba, SSD, GLA, KDA, Gated DeltaNet, RWKV, retention) multiply by exp(sum of log
// decays); with strong decays those products fall below FLT_MIN, and every arithmetic instruction that reads or
// writes a subnormal takes a microcode assist (tens to hundreds of cycles on x86). A subnormal is below 1.2e-38,
// far under any tolerance these kernels meet, so kernels run with subnormals flushed to zero, as GPUs do. The
// pool's workers run that way for their whole life; the calling thread only while it runs a parallel_for, and
// gets its own setting back afterwards.
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace attnzoo {

namespace float_env {
#if defined(__x86_64__) || defined(__i386__)
inline constexpr uint32_t kFlushBits = 0x8040;  // MXCSR FTZ (bit 15) | DAZ (bit 6)
inline uint32_t read() { return _mm_getcsr(); }
inline void write(uint32_t v) { _mm_setcsr(v); }
#elif defined(__aarch64__)
inline constexpr uint64_t kFlushBits = uint64_t(1) << 24;  // FPCR.FZ: flushes inputs and results
inline uint64_t read() {
  uint64_t v;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(v));
  return v;
}
inline void write(uint64_t v) { __asm__ __volatile__("msr fpcr, %0" : : "r"(v)); }
#else
inline constexpr uint32_t kFlushBits = 0;  // no control we know of: subnormals stay (slow, still correct)
inline uint32_t read() { return 0; }
inline void write(uint32_t) {}
#endif
}  // namespace float_env

// Turns flushing on in this thread for good (pool workers call it once).
inline void flush_denormals_in_this_thread() {
  const auto now = float_env::read();
  if ((now & float_env::kFlushBits) != float_env::kFlushBits) float_env::write(now | float_env::kFlushBits);
}

// Sets flushing on (Flush) or off in this thread for the guard's lifetime and restores the caller's setting
// after. Off is for code that must round exactly as an unflushed reference does (weight quantization matches
// numpy bit for bit, tiny values included). Only the flush bits go back: status flags the kernel raised stay
// visible to the caller.
template <bool Flush>
class DenormalsGuard {
 public:
  DenormalsGuard() : saved_(float_env::read()) {
    const auto want = Flush ? (saved_ | float_env::kFlushBits) : (saved_ & ~float_env::kFlushBits);
    if (want != saved_) float_env::write(want);
  }
  ~DenormalsGuard() {
    const auto now = float_env::read();
    const auto want = (now & ~float_env::kFlushBits) | (saved_ & float_env::kFlushBits);
    if (want != now) float_env::write(want);
  }
  DenormalsGuard(const DenormalsGuard&) = delete;
  DenormalsGuard& operator=(const DenormalsGuard&) = delete;

 private:
  decltype(float_env::read()) saved_;
};
using FlushDenormalsGuard = DenormalsGuard<true>;
using KeepDenormalsGuard = DenormalsGuard<false>;

}  // namespace attnzoo
