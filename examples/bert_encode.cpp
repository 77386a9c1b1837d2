// BERT-base encodes a batch of token ids: Hugging Face's BertModel in C++, each encoder layer 7
// fused kernels.
//   bert_encode [model.safetensors]
// With a path, the weights of a Hugging Face BertModel saved with safetensors (keys such as
// "encoder.layer.0.attention.self.query.weight"); without one, random weights.
#include <solder/solder.hpp>
#include <solder/nn/models/bert.hpp>

#include <chrono>
#include <cstdio>
#include <string>

namespace sd = solder;

int main(int argc, char** argv) {
  auto model = sd::models::bert();  // bert-base: 12 layers, hidden 768, 12 heads
  if (argc > 1) sd::io::load_safetensors(model, argv[1]);

  // Two sequences of 16 tokens; the second is 12 tokens long and padded.
  std::int64_t const batch = 2, length = 16;
  sd::Tensor<std::int64_t, 2> ids(batch, length), types = sd::zeros<std::int64_t>(batch, length),
      mask = sd::ones<std::int64_t>(batch, length);
  for (std::int64_t i = 0; i < length; ++i) {
    ids(0, i) = 101 + 37 * i % 2000;  // 101: [CLS]
    ids(1, i) = i < 12 ? 101 + 53 * i % 2000 : 0;
    mask(1, i) = i < 12;
  }

  auto const start = std::chrono::steady_clock::now();
  auto const out = model(ids, types, mask);
  double const ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  std::string const plan = sd::explain(model, ids, types, mask);
  std::printf("%s", plan.substr(0, plan.find('\n') + 1).c_str());
  std::printf("last_hidden_state [%lld, %lld, %lld], pooler_output [%lld, %lld] in %.1f ms\n",
              static_cast<long long>(out.last_hidden_state.size(0)), static_cast<long long>(out.last_hidden_state.size(1)),
              static_cast<long long>(out.last_hidden_state.size(2)), static_cast<long long>(out.pooler_output.size(0)),
              static_cast<long long>(out.pooler_output.size(1)), ms);
  std::printf("[CLS] of each sequence, first 4 of 768: ");
  for (std::int64_t n = 0; n < batch; ++n)
    std::printf("(%.4f %.4f %.4f %.4f) ", out.last_hidden_state(n, 0, 0), out.last_hidden_state(n, 0, 1),
                out.last_hidden_state(n, 0, 2), out.last_hidden_state(n, 0, 3));
  std::printf("\n");
}
