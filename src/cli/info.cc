#include <cstdio>
#include <cstdlib>
#include <string>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <hwy/targets.h>

#include "bench/blas_class.h"
#include "cli/commands.h"
#include "cli/generation_flags.h"
#include "cli/usage.h"
#include "core/amx.h"
#include "core/avx_vnni.h"
#include "core/bf16_dot.h"
#include "core/cpu_info.h"
#include "core/device.h"
#include "core/amx.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/thread_limits.h"
#include "core/threads.h"
#include "kernels/quant/gemv_kernels.h"

namespace attnzoo::cli {

void apply_global_options(std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size();) {
    if (args[i] == "-t") args[i] = "--threads";  // llama.cpp's spelling
    if ((args[i] == "--threads" || args[i] == "--target") && i + 1 >= args.size())
      throw ArgumentError(args[i] + ": needs a value");
    if (args[i] == "--threads") {
      const int64_t n = parse_number<int64_t>("--threads", args[i + 1]);
      // The pool's range, checked here so that the message names the flag.
      if (n < 1 || n > kMaxThreads)
        throw ArgumentError("--threads: must be in [1, " + std::to_string(kMaxThreads) + "], got " + args[i + 1]);
      ThreadPool::set_global_threads(int(n));
      args.erase(args.begin() + long(i), args.begin() + long(i) + 2);
    } else if (args[i] == "--target") {
      set_target(args[i + 1]);
      args.erase(args.begin() + long(i), args.begin() + long(i) + 2);
    } else {
      ++i;
    }
  }
}

namespace {

// The GPUs a CUDA build can use, or why there are none (a CPU-only build says so too).
void print_cuda_devices() {
  const int n = cuda_device_count();
  if (n == 0) {
    std::printf("cuda         none (%s)\n", cuda_unavailable_reason().c_str());
    return;
  }
  for (int i = 0; i < n; ++i) {
    const CudaDeviceInfo d = cuda_device_info(i);
    std::printf("cuda:%-7d %s, sm_%d%d, %d SMs, %.1f GiB\n", i, d.name.c_str(), d.sm_major, d.sm_minor,
                d.multiprocessors, double(d.memory_bytes) / double(1ull << 30));
  }
}

}  // namespace

int run_info(const std::vector<std::string>& args) {
  const char* usage = "usage: attnzoo info\n  CPU, caches, SIMD targets, threads, library versions and CUDA devices\n";
  for (const std::string& a : args) {
    if (is_help(a)) throw HelpRequested(usage);
    throw_unknown_option("info", a, usage);
  }
  const CpuInfo cpu = read_cpu_info();
  std::printf("attnzoo %s\n", ATTNZOO_VERSION);
  std::printf("cpu          %s\n", describe_cpu(cpu).c_str());
  std::printf("caches       L1d %lld KiB, L2 %lld KiB, L3 %lld MiB\n", (long long)(cpu.l1d_bytes >> 10),
              (long long)(cpu.l2_bytes >> 10), (long long)(cpu.l3_bytes >> 20));
  std::string targets;
  for (Target t : supported_targets()) targets += std::string(targets.empty() ? "" : " ") + target_name(t);
  std::printf("targets      %s\n", targets.c_str());
  std::printf("active       %s\n", target_name(active_target()));
  const Bf16DotPreference& bf16 = bf16_dot_preferred();
  if (amx_bf16_enabled())
    std::printf("bf16 products AMX tiles (without them: %s, %s)\n",
                bf16_dot_enabled() ? "vdpbf16ps" : "widened to f32", bf16.reason.c_str());
  else if (bf16_dot_enabled())
    std::printf("bf16 products vdpbf16ps (%s)\n", bf16.reason.c_str());
  else if (bf16_dot_available())
    std::printf("bf16 products widened to f32 (%s)\n", bf16.reason.c_str());
  else
    std::printf("bf16 products widened to f32 (no AVX-512-BF16 on this CPU / target)\n");
  std::printf("amx          %s\n", amx_bf16_enabled() ? amx_support().reason.c_str()
                                  : amx_support().use ? "off under a target below avx512_bf16" : amx_support().reason.c_str());
  const AvxVnniSupport& avx_vnni = avx_vnni_support();
  std::printf("avx-vnni     %s\n", !avx_vnni.use                ? avx_vnni.reason.c_str()
                                  : quant_gemv_vnni_enabled()   ? "unused: the AVX-512 VNNI rows run (ATTNZOO_TARGET=avx2 takes the AVX2 rows)"
                                  : !quant_gemv_avx2_enabled() ? "unused under the scalar target"
                                                                : avx_vnni.reason.c_str());
  std::printf("threads      %d (ATTNZOO_THREADS / --threads)\n", ThreadPool::global().num_threads());
  std::printf("highway      %s\n", ATTNZOO_HWY_VERSION);
  const BlasCoreChoice& choice = configure_blas();
  const BlasKernel blas = blas_kernel();
  std::printf("blas         %s (single-threaded inside attnzoo's pool)\n", blas.config.c_str());
  if (const std::string note = bench::blas_choice_note(choice); !note.empty())
    std::printf("             note: %s\n", note.c_str());
  if (const std::string note = bench::blas_class_note(blas.core, active_target(), std::getenv("OPENBLAS_CORETYPE"));
      !note.empty())
    std::printf("             note: %s\n", note.c_str());
  char pcre2_version[64] = {};
  pcre2_config(PCRE2_CONFIG_VERSION, pcre2_version);
  std::printf("pcre2        %s\n", pcre2_version);
  std::printf("compiler     g++ %d.%d.%d, C++%ld\n", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__,
              long(__cplusplus / 100 % 100));
  print_cuda_devices();
  return 0;
}

}  // namespace attnzoo::cli
