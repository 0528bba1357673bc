// libFuzzer entry point for tokenizer.json loading and encoding (see README.md).
#include <cstddef>
#include <cstdint>

#include "tokenizer/fuzz_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    attnzoo::fuzzing::exercise_tokenizer(data, size);
  } catch (const attnzoo::ArgumentError&) {  // LoadError included
  }
  return 0;
}
