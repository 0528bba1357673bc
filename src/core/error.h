#pragma once
// Errors raised at API boundaries. Kernels behind the boundary assume validated input.
// ArgumentError maps to Python ValueError, DTypeError to TypeError, DeviceError to RuntimeError (see python/bindings/module.cc).
#include <concepts>
#include <stdexcept>
#include <string>

namespace attnzoo {

struct ArgumentError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct DTypeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A device failed or is absent: a CUDA call's error (named with the call), no GPU, a build without CUDA.
// Maps to Python RuntimeError.
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws ArgumentError("<argument>: <message>") when the condition is false.
inline void require(bool ok, const char* argument, const std::string& message) {
  if (!ok) throw ArgumentError(std::string(argument) + ": " + message);
}
// The same for a literal message: no std::string is built unless it throws (checks on the decode path run every
// step, and a decode step allocates nothing).
inline void require(bool ok, const char* argument, const char* message) {
  if (!ok) throw ArgumentError(std::string(argument) + ": " + message);
}
// The same for a message that must be formatted (numbers, shapes): `message` is called, and the string built,
// only when it throws.
template <std::invocable Message>
void require(bool ok, const char* argument, Message&& message) {
  if (!ok) throw ArgumentError(std::string(argument) + ": " + message());
}

}  // namespace attnzoo
