#pragma once
// The delta-family recurrence (delta rule, gated delta rule, KDA) on an NVIDIA GPU, one token at a time: the
// decode step, and the recurrent form of short inputs. A CTA owns one (sequence, value head, slice of V
// columns) and keeps that slice of the f32 state in registers across the sequence's tokens, so the state is
// read from memory once and written once per call however many tokens it holds (see
// delta_recurrent_kernel.cuh). Same semantics as delta_reference; no CUDA headers here.
#include "core/device.h"
#include "kernels/linear/common/delta_problem.h"

namespace attnzoo {

// What only the CUDA path requires beyond make_delta_problem's checks: K <= 256 (the state rows one thread
// block spreads over its threads' registers); every tensor's data aligned to its element size; at most 2^31 - 1
// thread blocks. ArgumentError naming the argument.
void check_cuda_delta_recurrent(const DeltaProblem& p);

// The value scans make_delta_problem leaves to the device (p.check_values): NaN / Inf in q, k, v, g, beta and
// initial_state, positive log decays in g. One scan kernel per tensor, then one small copy back (the host waits
// for it: a checked call is a synchronising call; decode steps pass check_values = false). ArgumentError with
// make_delta_problem's wording for the first offending element.
void check_delta_values_cuda(const DeltaProblem& p, Stream stream);

// Runs a validated problem whose tensors live on the current device, on `stream`. Host metadata (the
// sequences) is uploaded stream-ordered, so nothing needs to outlive the call on the host.
void recurrent_delta_cuda(const DeltaProblem& p, Stream stream);

}  // namespace attnzoo
