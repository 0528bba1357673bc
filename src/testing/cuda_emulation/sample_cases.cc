// The GPU sampler (engine/cuda/sample_kernel.cuh) under the CTA emulator against the CPU's Sampler: the same
// seeds must give the same tokens, step after step, for greedy rows (ties at the max included), plain temperature
// draws, top-k, top-p, min-p and their combinations, penalties, rows of logits on a coarse grid (ties at every
// boundary the filters and the draw search for), masked (-inf) rows, nuclei wide enough that the candidates must
// widen to the whole row, and padded row strides; and the CPU's refusals (NaN, +inf, all -inf, an overflowing
// temperature) for the rows that earn them, with the other rows still sampled; several samplers reading one row
// (the engine's n > 1 forks).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/cuda/sample_kernel.cuh"
#include "engine/cuda/sample_plan.h"
#include "engine/sampler.h"
#include "testing/cuda_emulation/cta.h"

namespace attnzoo {
namespace {
using namespace cuda_sample;
using cuda_emulation::DeviceMemory;

enum class Shape { normal, peaked, flat, grid, masked };

std::vector<float> make_logits(int64_t rows, int64_t vocab, int64_t stride, Shape shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(size_t(rows * stride), NAN);  // the padding between rows must never be read
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < vocab; ++i) {
      float v = normal(rng);
      switch (shape) {
        case Shape::normal: v *= 3.f; break;
        case Shape::peaked: v = v * 2.f + (i % 97 == 5 ? 9.f : 0.f); break;
        case Shape::flat: v *= 0.05f; break;
        case Shape::grid: v = std::round(v * 2.f) / 2.f; break;  // eighths of the range: ties everywhere
        case Shape::masked: v = (i * 7 + r) % 5 == 0 ? v * 3.f : -INFINITY; break;
      }
      x[size_t(r * stride + i)] = v;
    }
  return x;
}

struct Case {
  SamplingParams params;
  int64_t rows = 4, vocab = 700, stride = 0;
  Shape shape = Shape::normal;
  int steps = 3;
  bool context = false;
};

std::string describe(const Case& c) {
  const SamplingParams& p = c.params;
  return "rows " + std::to_string(c.rows) + " vocab " + std::to_string(c.vocab) + " stride " +
         std::to_string(c.stride) + " shape " + std::to_string(int(c.shape)) + " temperature " +
         std::to_string(p.temperature) + " top_k " + std::to_string(p.top_k) + " top_p " + std::to_string(p.top_p) +
         " min_p " + std::to_string(p.min_p) + " penalties " + std::to_string(p.repetition_penalty) + "/" +
         std::to_string(p.presence_penalty) + "/" + std::to_string(p.frequency_penalty);
}

// The kernel over one step's rows, as sample.cu launches it; the statuses and ids as the host reads them.
struct Emulated {
  std::vector<int32_t> ids, status;
};
// `rows`: the sampled rows, one per sampler (logit_rows, when given, says which row of `logits` each reads).
Emulated run_emulated(const std::vector<float>& logits, int64_t rows, int64_t vocab, int64_t stride,
                      std::vector<Sampler*> samplers, const std::vector<std::span<const int32_t>>& contexts,
                      std::span<const int64_t> logit_rows = {}) {
  const SamplePlan plan = plan_samples(vocab, samplers, contexts, logit_rows);
  DeviceMemory x(logits.size() * sizeof(float)), settings(plan.rows.size() * sizeof(RowSettings));
  DeviceMemory penalties(std::max<size_t>(1, plan.penalties.size()) * sizeof(PenaltyEntry));
  DeviceMemory work(size_t(rows * vocab) * sizeof(float)), candidates(size_t(rows * vocab) * sizeof(Candidate));
  DeviceMemory out(size_t(rows) * sizeof(int32_t)), status(size_t(rows) * sizeof(int32_t));
  std::memcpy(x.data(), logits.data(), logits.size() * sizeof(float));
  std::memcpy(settings.data(), plan.rows.data(), settings.size());
  if (!plan.penalties.empty()) std::memcpy(penalties.data(), plan.penalties.data(), plan.penalties.size() * sizeof(PenaltyEntry));
  SampleParams p{};
  p.logits = reinterpret_cast<const float*>(x.data());
  p.row_stride = stride;
  p.vocab = int32_t(vocab);
  p.rows = reinterpret_cast<const RowSettings*>(settings.data());
  p.penalties = reinterpret_cast<const PenaltyEntry*>(penalties.data());
  p.work = reinterpret_cast<float*>(work.data());
  p.candidates = reinterpret_cast<Candidate*>(candidates.data());
  p.out = reinterpret_cast<int32_t*>(out.data());
  p.status = reinterpret_cast<int32_t*>(status.data());
  cuda_emulation::launch(dim3(unsigned(rows)), kThreads, 0, [&](unsigned char*) { sample_row(p); });
  Emulated e{std::vector<int32_t>(size_t(rows)), std::vector<int32_t>(size_t(rows))};
  std::memcpy(e.ids.data(), out.data(), out.size());
  std::memcpy(e.status.data(), status.data(), status.size());
  return e;
}

void check_case(Case c, uint64_t seed) {
  if (c.stride == 0) c.stride = c.vocab;
  SCOPED_TRACE(describe(c) + " seed " + std::to_string(seed));
  // Each row has its own sampler (seeded apart), twice: one for the CPU, one for the kernel's plan.
  std::vector<Sampler> cpu, gpu;
  for (int64_t r = 0; r < c.rows; ++r) {
    SamplingParams p = c.params;
    p.seed = seed * 1000 + uint64_t(r);
    cpu.emplace_back(p);
    gpu.emplace_back(p);
  }
  std::vector<std::vector<int32_t>> history(size_t(c.rows));
  std::mt19937_64 rng(seed);
  for (int64_t r = 0; r < c.rows && c.context; ++r)
    for (int i = 0; i < 40; ++i) history[size_t(r)].push_back(int32_t(rng() % uint64_t(c.vocab / 8 + 1)));
  for (int step = 0; step < c.steps; ++step) {
    const std::vector<float> logits = make_logits(c.rows, c.vocab, c.stride, c.shape, seed * 31 + uint64_t(step));
    std::vector<std::span<const int32_t>> contexts;
    std::vector<Sampler*> samplers;
    std::vector<int32_t> want;
    for (int64_t r = 0; r < c.rows; ++r) {
      contexts.emplace_back(history[size_t(r)]);
      samplers.push_back(&gpu[size_t(r)]);
      want.push_back(cpu[size_t(r)].sample(std::span(logits.data() + r * c.stride, size_t(c.vocab)), contexts.back()));
    }
    const Emulated got = run_emulated(logits, c.rows, c.vocab, c.stride, samplers, contexts);
    for (int64_t r = 0; r < c.rows; ++r) {
      ASSERT_EQ(got.status[size_t(r)], kRowOk) << "row " << r << " step " << step;
      ASSERT_EQ(got.ids[size_t(r)], want[size_t(r)]) << "row " << r << " step " << step;
      history[size_t(r)].push_back(want[size_t(r)]);
    }
  }
}

SamplingParams params(float temperature, int64_t top_k = 0, float top_p = 1.f, float min_p = 0.f) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  return p;
}

TEST(EmulatedSampling, GreedyTakesTheFirstMaximumAfterPenalties) {
  for (Shape shape : {Shape::normal, Shape::grid, Shape::masked}) {
    check_case({params(0.f), 5, 900, 0, shape, 3, false}, 1);
    Case penalised{params(0.f), 3, 500, 512, shape, 4, true};
    penalised.params.repetition_penalty = 1.3f;
    penalised.params.presence_penalty = 0.4f;
    penalised.params.frequency_penalty = 0.25f;
    check_case(penalised, 2);
  }
}

TEST(EmulatedSampling, PlainDrawsMatchTheCpu) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    check_case({params(1.f), 4, 1500, 0, Shape::normal, 3, false}, seed);
    check_case({params(0.7f), 3, 333, 340, Shape::grid, 3, false}, seed);
    check_case({params(1.3f), 2, 900, 0, Shape::masked, 2, false}, seed);
  }
}

TEST(EmulatedSampling, TopKMatchesTheCpuWithTiesAtTheKth) {
  for (int64_t k : {1, 7, 50, 399}) {
    for (Shape shape : {Shape::normal, Shape::grid, Shape::flat})
      check_case({params(0.9f, k), 2, 400, 0, shape, 2, false}, uint64_t(k) + 10);
  }
}

TEST(EmulatedSampling, TopPMatchesTheCpuFromPeakedToFlat) {
  for (float top_p : {0.1f, 0.6f, 0.99f}) {
    for (Shape shape : {Shape::normal, Shape::peaked, Shape::flat, Shape::grid, Shape::masked})
      check_case({params(1.f, 0, top_p), 2, 500, 0, shape, 2, false}, uint64_t(top_p * 100) + uint64_t(shape));
  }
}

TEST(EmulatedSampling, FiltersCombineAsOnTheCpu) {
  Case c{params(0.8f, 40, 0.8f, 0.05f), 3, 1000, 1003, Shape::grid, 3, true};
  c.params.repetition_penalty = 1.2f;
  check_case(c, 5);
  check_case({params(1.f, 0, 1.f, 0.1f), 4, 600, 0, Shape::normal, 3, false}, 6);  // min-p alone, in id order
  check_case({params(1.5f, 0, 1.f, 0.02f), 2, 600, 0, Shape::flat, 2, false}, 7);
  check_case({params(1.f, 5, 1.f, 0.3f), 3, 400, 0, Shape::grid, 2, false}, 8);
  check_case({params(0.6f, 0, 0.95f, 0.01f), 3, 900, 0, Shape::peaked, 2, false}, 9);
}

TEST(EmulatedSampling, SamplersSharingARowMatchTheCpu) {
  // The n samples forked from one prompt read its one row, each with its own settings, generator and context.
  const int64_t vocab = 800, stride = 808;
  const int64_t logit_rows[] = {1, 0, 1, 1, 2, 1};
  std::vector<SamplingParams> settings = {params(0.f), params(1.f), params(0.8f, 20), params(1.2f, 0, 0.7f),
                                          params(0.9f, 0, 1.f, 0.05f), params(1.f, 9, 0.9f)};
  settings[2].repetition_penalty = 1.4f;
  settings[5].frequency_penalty = 0.6f;
  std::vector<Sampler> cpu, gpu;
  for (size_t i = 0; i < settings.size(); ++i) {
    settings[i].seed = 70 + i;
    cpu.emplace_back(settings[i]);
    gpu.emplace_back(settings[i]);
  }
  std::mt19937_64 rng(5);
  std::vector<std::vector<int32_t>> history(settings.size());
  for (auto& h : history)
    for (int i = 0; i < 30; ++i) h.push_back(int32_t(rng() % 100));
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const std::vector<float> logits = make_logits(3, vocab, stride, step == 1 ? Shape::grid : Shape::normal, 40 + uint64_t(step));
    std::vector<std::span<const int32_t>> contexts;
    std::vector<Sampler*> samplers;
    std::vector<int32_t> want;
    for (size_t i = 0; i < settings.size(); ++i) {
      contexts.emplace_back(history[i]);
      samplers.push_back(&gpu[i]);
      want.push_back(cpu[i].sample(std::span(logits.data() + logit_rows[i] * stride, size_t(vocab)), contexts.back()));
    }
    const Emulated got = run_emulated(logits, int64_t(settings.size()), vocab, stride, samplers, contexts, logit_rows);
    for (size_t i = 0; i < settings.size(); ++i) {
      ASSERT_EQ(got.status[i], kRowOk) << "sampler " << i;
      ASSERT_EQ(got.ids[i], want[i]) << "sampler " << i;
      history[i].push_back(want[i]);
    }
  }
  // The row each sampler reads is in its settings; one outside the int32 range of a launch is refused.
  const SamplePlan plan = plan_samples(vocab, std::vector<Sampler*>{&gpu[0], &gpu[1]},
                                       std::vector<std::span<const int32_t>>(2), std::vector<int64_t>{2, 0});
  EXPECT_EQ(plan.rows[0].logits_row, 2);
  EXPECT_EQ(plan.rows[1].logits_row, 0);
  EXPECT_THROW(plan_samples(vocab, std::vector<Sampler*>{&gpu[0]}, std::vector<std::span<const int32_t>>(1),
                            std::vector<int64_t>{-1}),
               ArgumentError);
}

TEST(EmulatedSampling, RefusedRowsGetTheCpuErrorsAndTheOthersStillSample) {
  const int64_t vocab = 300;
  std::vector<float> logits = make_logits(5, vocab, vocab, Shape::normal, 3);
  logits[size_t(0 * vocab + 17)] = NAN;
  logits[size_t(1 * vocab + 3)] = INFINITY;
  for (int64_t i = 0; i < vocab; ++i) logits[size_t(2 * vocab + i)] = -INFINITY;
  logits[size_t(3 * vocab + 5)] = 50.f;  // times 1e37 overflows
  std::vector<Sampler> samplers;
  for (int r = 0; r < 5; ++r) samplers.emplace_back(params(r == 3 ? 1e-37f : 1.f));
  std::vector<Sampler*> rows;
  for (Sampler& s : samplers) rows.push_back(&s);
  const std::vector<std::span<const int32_t>> contexts(5);
  const Emulated got = run_emulated(logits, 5, vocab, vocab, rows, contexts);
  const int32_t want[] = {kRowNan, kRowPosInf, kRowAllNegInf, kRowOverflow, kRowOk};
  for (int r = 0; r < 5; ++r) EXPECT_EQ(got.status[size_t(r)], want[r]) << "row " << r;
  EXPECT_GE(got.ids[4], 0);
  const char* messages[] = {"logits: contain NaN (row 0)", "logits: contain +inf (row 1)",
                            "logits: are all -inf: no token can be sampled (row 2)",
                            "temperature: is so small that the scaled logits overflow (row 3)"};
  for (int r = 0; r < 4; ++r) {
    try {
      raise_row_status(got.status[size_t(r)], r);
      ADD_FAILURE() << "row " << r << " raised nothing";
    } catch (const ArgumentError& e) {
      EXPECT_STREQ(e.what(), messages[r]);
    }
  }
}

TEST(EmulatedSampling, ThePlanChecksContextsAndDrawsOnlyForSampledRows) {
  Sampler greedy(params(0.f)), sampled(params(1.f));
  Sampler* rows[] = {&greedy, &sampled};
  const std::vector<int32_t> bad{3, 700};
  const std::vector<std::span<const int32_t>> contexts{std::span<const int32_t>(), bad};
  try {
    plan_samples(700, rows, contexts);
    ADD_FAILURE() << "an id outside the vocabulary was accepted";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("context_ids: token id 700 of row 1"), std::string::npos) << e.what();
  }
  // Each row takes the draw at its position and moves on, as Sampler::sample would (the greedy row's goes unused).
  Sampler twin(params(1.f));
  const std::vector<std::span<const int32_t>> empty(2);
  const SamplePlan plan = plan_samples(700, rows, empty);
  EXPECT_EQ(plan.rows[1].u, twin.take_token_draw());
  EXPECT_EQ(plan.rows[0].u, 0.0);
  EXPECT_EQ(greedy.position(), 1);
  EXPECT_EQ(sampled.position(), 1);
  EXPECT_EQ(plan.rows[0].top_k, 0);
}

}  // namespace
}  // namespace attnzoo
