# Writes sm90_wgmma.cuh: the wgmma.mma_async inline PTX for each N, operand form and dtype (the accumulator
# lists are too long to write by hand).
import pathlib

out = []
w = out.append
w('''#pragma once
// wgmma.mma_async m64nNk16 with f32 accumulators, one function per (N, operand form); written out by a script
// because each names its N / 2 accumulator registers. Included by sm90.cuh on a GPU build only; the layouts and
// the emulated twin are described there. Written by scripts/gen_sm90_wgmma.py: change that, not this.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace attnzoo::sm90 {
''')
for N in (64, 128, 256):
    n = N // 2
    regs = ", ".join(f"%{i}" for i in range(n))
    outs = ", ".join(f'"+f"(d[{i // 4}][{i % 4}])' for i in range(n))
    for form in ("ss", "rs"):
        if form == "ss":
            sig = f"float (&d)[{N // 8}][4], uint64_t a, uint64_t b, int scale_d"
            a_ops = f"%{n}"
            ins = '"l"(a), "l"(b), "r"(scale_d), "n"(TransB)'
            b_op, p_op, t_op = f"%{n + 1}", f"%{n + 2}", f"%{n + 3}"
            tail = f'p, 1, 1, 0, {t_op}'
        else:
            sig = f"float (&d)[{N // 8}][4], const uint32_t (&a)[4], uint64_t b, int scale_d"
            a_ops = "{" + ", ".join(f"%{n + i}" for i in range(4)) + "}"
            ins = '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d), "n"(TransB)'
            b_op, p_op, t_op = f"%{n + 4}", f"%{n + 5}", f"%{n + 6}"
            tail = f'p, 1, 1, {t_op}'
        w(f"template <class Elem, int TransB>\n__device__ __forceinline__ void wgmma_{form}_n{N}({sig}) {{")
        for ty, name in (("__nv_bfloat16", "bf16"), ("__half", "f16")):
            w(f"  if constexpr (std::is_same_v<Elem, {ty}>) {{" if name == "bf16" else "  } else {")
            w('    asm volatile(')
            w(f'        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, {p_op}, 0;\\n"')
            w(f'        "wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{name}.{name} "')
            w(f'        "{{{regs}}}, "')
            w(f'        "{a_ops}, {b_op}, {tail};\\n}}\\n"')
            w(f'        : {outs}')
            w(f'        : {ins});')
        w("  }\n}\n")
w("}  // namespace attnzoo::sm90")
open(pathlib.Path(__file__).parent.parent / "src/kernels/softmax/cuda/sm90_wgmma.cuh", "w").write("\n".join(out) + "\n")
