#pragma once
// Activation statistics for importance-weighted quantization (llama.cpp's imatrix): the checkpoint runs on a
// calibration text, and every Linear's input x [T, in] adds x^2 per input channel; the mean over all tokens is
// that weight's importance vector. Quantizing with it weighs each weight's error by how strongly its channel is
// driven, i.e. it minimises the expected output error on text like the calibration text instead of the plain
// weight error.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attnzoo {

struct CalibrationStats {
  std::vector<std::pair<std::string, std::vector<float>>> importance;  // "<module>.weight" -> mean x^2 per column
  int64_t tokens = 0;   // tokens run
  int64_t chunks = 0;   // independent sequences they ran as
};

// Runs `model_dir` (any checkpoint attnzoo loads) on the text of `text_path`, tokenized by the checkpoint's
// tokenizer, in independent chunks of `chunk` tokens (llama-imatrix's n_ctx; the last, shorter one included),
// at most `max_tokens` tokens in all (0: the whole text). ArgumentError naming `argument` (the flag or keyword that
// gave the path) and the file when it cannot be read (text_file.h: no directory, at most 1 GiB), is not UTF-8 or
// tokenizes to nothing.
CalibrationStats collect_importance(const std::string& model_dir, const std::string& text_path, int64_t chunk = 512,
                                    int64_t max_tokens = 0, const std::string& argument = "calibration");

}  // namespace attnzoo
