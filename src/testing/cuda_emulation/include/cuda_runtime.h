#pragma once
// Stand-in for the toolkit's cuda_runtime.h under emulation: the device builtins are the prelude's.
#include "testing/cuda_emulation/prelude.h"
