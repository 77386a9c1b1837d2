// The variable-length caption experiment of reference/001 in miniature: batches of token ids
// whose length changes from batch to batch go through a compiled BERT encoder four ways —
// padded to the longest length, padded to a multiple of 8, padded to a few buckets, and not
// padded at all with one dynamic-shape specialization — and each prints its throughput (real
// tokens per second) and its recompiles.
//   dynamic_lengths [batches]
#include <solder/solder.hpp>
#include <solder/nn/models/bert.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

namespace sd = solder;

struct Batch {
  sd::Tensor<std::int64_t, 2> ids, mask;  // mask: 1 on real tokens
  std::int64_t tokens = 0;
};

// 8 captions of 8 to 120 tokens, padded to the batch's longest.
std::vector<Batch> captions(int count) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int64_t> length(8, 120), token(1, 999);
  std::vector<Batch> batches;
  for (int b = 0; b < count; ++b) {
    std::vector<std::int64_t> lengths(8);
    std::int64_t longest = 0;
    for (auto& l : lengths) longest = std::max(longest, l = length(rng));
    Batch batch{sd::zeros<std::int64_t>(8, longest), sd::zeros<std::int64_t>(8, longest)};
    for (std::int64_t n = 0; n < 8; ++n)
      for (std::int64_t i = 0; i < lengths[n]; ++i) batch.ids(n, i) = token(rng), batch.mask(n, i) = 1;
    batch.tokens = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
    batches.push_back(std::move(batch));
  }
  return batches;
}

template <class Pad>
void run(char const* strategy, sd::models::BertModel const& model, std::vector<Batch> const& batches, Pad pad,
         sd::Options options) {
  options.name = strategy;
  auto compiled = sd::compile(model, options);
  std::int64_t tokens = 0;
  auto const start = std::chrono::steady_clock::now();
  for (auto const& b : batches) {
    auto const ids = pad(b.ids), mask = pad(b.mask);  // padded tokens are masked out
    auto const types = sd::zeros<std::int64_t>(ids.size(0), ids.size(1));
    compiled(ids, types, mask);
    tokens += b.tokens;
  }
  double const seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto const s = compiled.stats();
  std::printf("%-26s %8.0f tokens/s  %2llu recompiles, %zu specializations%s\n", strategy, tokens / seconds,
              static_cast<unsigned long long>(s.recompiles), s.specializations, s.generic ? " (generic)" : "");
}

int main(int argc, char** argv) {
  int const count = argc > 1 ? std::atoi(argv[1]) : 24;
  auto const model = sd::models::bert({.vocab_size = 1000, .hidden_size = 128, .num_hidden_layers = 2,
                                       .num_attention_heads = 4, .intermediate_size = 512,
                                       .max_position_embeddings = 128});
  auto const batches = captions(count);
  std::printf("%d batches of 8 captions, 8 to 120 tokens\n", count);
  run("padded to 128", model, batches, [](auto const& t) { return sd::buckets{128}.pad(t, 1).tensor; }, {});
  run("padded to a multiple of 8", model, batches, [](auto const& t) { return sd::pad_to<8>(t, 1).tensor; },
      {.recompile_limit = 16});
  run("buckets 32/64/96/128", model, batches, [](auto const& t) { return sd::buckets{32, 64, 96, 128}.pad(t, 1).tensor; },
      {});
  run("dynamic, not padded", model, batches, [](auto const& t) { return t; }, {.dynamic = true});
}
