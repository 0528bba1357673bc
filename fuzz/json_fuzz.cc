// libFuzzer entry point for the JSON parser and the Config getters on top of it (see README.md).
#include <cstddef>
#include <cstdint>

#include "loader/fuzz_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    attnzoo::fuzzing::exercise_json(data, size);
  } catch (const attnzoo::LoadError&) {
  }
  return 0;
}
