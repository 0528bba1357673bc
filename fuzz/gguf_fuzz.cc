// libFuzzer entry point for the GGUF reader (see README.md). Accepting or throwing LoadError are both
// fine; anything else (a crash, a sanitizer report, another exception escaping) is a finding.
#include <cstddef>
#include <cstdint>

#include "loader/fuzz_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    attnzoo::fuzzing::exercise_gguf(data, size);
  } catch (const attnzoo::LoadError&) {
  }
  return 0;
}
