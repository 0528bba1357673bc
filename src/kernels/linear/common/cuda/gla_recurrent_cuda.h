#pragma once
// The gated linear recurrence (linear attention, retention, simple GLA, GLA) on an NVIDIA GPU, one token at a
// time: the decode step, and the recurrent form of short inputs. A CTA owns one (sequence, value head, slice of
// V columns) and keeps that slice of the f32 state in registers across the sequence's tokens, so the state is
// read from memory once and written once per call however many tokens it holds (see
// gla_recurrent_kernel.cuh). Same semantics as gated_linear_reference; no CUDA headers here.
#include "core/device.h"
#include "kernels/linear/common/gla_problem.h"

namespace attnzoo {

// What only the CUDA path requires beyond make_gla_problem's checks: K <= 256 (the state rows one thread block
// spreads over its threads' registers); every tensor's data aligned to its element size; final_z not aliasing
// initial_z (every CTA of a key head reads initial_z, one writes final_z); at most 2^31 - 1 thread blocks.
// ArgumentError naming the argument.
void check_cuda_gla_recurrent(const GlaProblem& p);

// The value scan make_gla_problem leaves to the device: a device-resident g_gamma, finite and <= 0. Waits for
// the device (a checked call is a synchronising call; decode steps pass check_values = false).
void check_gla_values_cuda(const GlaProblem& p, Stream stream);

// Runs a validated problem whose tensors live on the current device, on `stream`. Host metadata (the sequences,
// a host g_gamma) is uploaded stream-ordered, so nothing needs to outlive the call on the host.
void recurrent_gla_cuda(const GlaProblem& p, Stream stream);

}  // namespace attnzoo
