#pragma once
// Where a model runs, as the front ends name it (`--device`, Python's device=): "cpu", "cuda", "cuda:N" or
// "auto". The model runner's reach is decided here once, so Model::load's refusal and "auto" cannot disagree:
// the runner computes on the host so far (its kernels run on a GPU only through their own entry points), so
// "auto" resolves to the CPU and a GPU is refused by name until the runner computes there.
#include <string>

#include "core/device.h"

namespace attnzoo {

// True when a model's layers can compute on `device` (and its memory pool live there).
bool model_runs_on(Device device);

// "auto": the first GPU when model_runs_on it and the CUDA build finds one, else the CPU. Otherwise
// parse_device's names; an ArgumentError naming `argument` for anything else.
Device resolve_model_device(const std::string& text, const char* argument);

// The ArgumentError for a device model_runs_on refuses, naming `argument`.
void require_model_device(Device device, const char* argument);

}  // namespace attnzoo
