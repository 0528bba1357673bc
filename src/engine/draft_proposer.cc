#include "engine/draft_proposer.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "engine/model_adapters.h"
#include "engine/ngram_proposer.h"

namespace attnzoo {

DraftProposer::DraftProposer(LogitsSource& draft, int64_t target_vocab) : draft_(draft), target_vocab_(target_vocab) {
  const int64_t v = draft.vocab_size();
  // Checkpoints pad their embedding tables differently (Qwen2.5: 151936 against 152064 rows); more than a 1/64
  // difference is another tokenizer.
  require(std::llabs(v - target_vocab) * 64 <= std::max(v, target_vocab), "draft_model",
          "has a vocabulary of " + std::to_string(v) + " tokens, the target " + std::to_string(target_vocab) +
              ": a draft must share the target's tokenizer");
  require(draft.can_speculate(), "draft_model", "cannot roll back, so it cannot draft");
}

void DraftProposer::propose(std::span<const int32_t> context, int64_t k, const Sampler& target, Proposal& out) {
  out.tokens.clear();
  out.q.clear();
  if (context.empty() || k <= 0) return;
  const int64_t max_positions = draft_.max_positions();
  if (max_positions > 0) k = std::min<int64_t>(k, max_positions - int64_t(context.size()));
  if (k <= 0) return;
  draft_.keep_rollback_room(k + 1);
  // The draft keeps what it computed last time up to where the target's tokens leave its own guesses (never
  // behind its checkpoint: that far back it starts over); the context's last token is always fed again so its
  // logits come back.
  int64_t common = std::mismatch(seen_.begin(), seen_.end(), context.begin(), context.end()).first - seen_.begin();
  common = std::min<int64_t>(common, int64_t(context.size()) - 1);
  if (common < checkpoint_) {
    draft_.rollback(0);
    common = 0;
  } else if (common < int64_t(seen_.size())) {
    draft_.rollback(common);
  }
  seen_.resize(size_t(common));
  const int64_t V = draft_.vocab_size();
  logits_.resize(size_t(V));
  // Padding rows differ between checkpoints: a token past the draft's table (the target sampled one of its
  // padding ids) goes to the draft as id 0. Its guesses only get worse; exactness never depends on them.
  std::vector<int32_t> fed;
  auto feed = [&](std::span<const int32_t> tokens) {
    fed.clear();
    for (int32_t t : tokens) fed.push_back(t >= 0 && t < V ? t : 0);
    draft_.append(fed, logits_);
    seen_.insert(seen_.end(), tokens.begin(), tokens.end());
  };
  feed(context.subspan(size_t(common)));
  draft_.checkpoint();
  checkpoint_ = int64_t(seen_.size());
  // Guesses come only from ids both vocabularies hold: q is the draft's distribution restricted to them and
  // renormalised, a proposal distribution like any other, so the rejection rule stays exact.
  const int64_t shared_vocab = std::min(V, target_vocab_);
  std::vector<int32_t> ctx;  // penalties of the draft's processing see only the ids its logits have
  int64_t prompt = 0;         // of them, the prompt's
  for (size_t i = 0; i < context.size(); ++i) {
    if (context[i] >= V) continue;
    ctx.push_back(context[i]);
    prompt += int64_t(i) < target.prompt_length();
  }
  // The target's parameters and prompt; its own draws are never used.
  Sampler processing(target.params(), prompt);
  for (int64_t i = 0; i < k; ++i) {
    std::vector<float> q;
    processing.probabilities(logits_, ctx, q);
    q.resize(size_t(shared_vocab));
    double mass = 0.0;
    for (float x : q) mass += double(x);
    if (!(mass > 0.0)) break;  // every bit of the draft's mass lies on ids the target lacks
    if (shared_vocab < V) for (float& x : q) x = float(double(x) / mass);
    const double u = keyed_uniform(target.params().seed, uint64_t(target.position() + i), DrawPurpose::guess);
    const int32_t d = draw_from_probabilities(q, u);
    out.tokens.push_back(d);
    out.q.push_back(std::move(q));
    ctx.push_back(d);
    if (i + 1 < k) feed(std::span(&d, 1));
  }
}

namespace {

// A draft model's own sequence and the proposer over it.
class ModelDraftProposer : public Proposer {
 public:
  ModelDraftProposer(const Model& draft, int64_t target_vocab) : sequence_(draft), inner_(sequence_, target_vocab) {}
  void propose(std::span<const int32_t> context, int64_t k, const Sampler& target, Proposal& out) override {
    inner_.propose(context, k, target, out);
  }

 private:
  ModelSequence sequence_;
  DraftProposer inner_;
};

}  // namespace

std::unique_ptr<Proposer> make_proposer(const SpeculativeOptions& options, const Model* draft, int64_t target_vocab) {
  options.validate();
  switch (options.method) {
    case SpeculativeMethod::none: return nullptr;
    case SpeculativeMethod::ngram:
      return std::make_unique<NgramProposer>(options.prompt_lookup_min, options.prompt_lookup_max);
    case SpeculativeMethod::draft:
      require(draft != nullptr, "draft_model", "the 'draft' method needs a loaded draft model");
      return std::make_unique<ModelDraftProposer>(*draft, target_vocab);
  }
  return nullptr;
}

}  // namespace attnzoo
