// Embedding<I, W>: torch.nn.functional.embedding, the rows of a weight [num_embeddings, dim]
// picked by integer indices of any shape: a kernel anchor of the contraction kind (rule 3), so
// the element-wise expression over it runs on each row as it is gathered
// (`embedding(ids, w) * scale + positions` is one kernel). Its engine
// (backend/host/embedding.hpp) reads the operands from memory and checks every index first.
#pragma once
#include <string>
#include <type_traits>

#include "contract.hpp"

namespace solder {

template <class I, class W>
struct Embedding : detail::ExprTag {
  static constexpr NodeKind kind = NodeKind::contract;
  using child_types = types<I, W>;
  using value_type = typename W::value_type;
  using device_type = typename detail::device_join<typename I::device_type, typename W::device_type>::type;
  static constexpr int rank = I::rank + 1;
  static_assert(std::is_same_v<typename I::value_type, std::int32_t> ||
                    std::is_same_v<typename I::value_type, std::int64_t>,
                "solder: embedding: the indices must be int32 or int64 (PyTorch's IntTensor or LongTensor)");
  static_assert(W::rank == 2, "solder: embedding: the weight must be [num_embeddings, embedding_dim]");
  static_assert(detail::devices_agree<typename I::device_type, typename W::device_type>(),
                "solder: embedding: indices and weight live on different devices");
  static constexpr auto static_extents = [] {
    Extents<rank> e{};
    for (int i = 0; i < I::rank; ++i) e.e[i] = I::static_extents.e[i];
    e.e[rank - 1] = W::static_extents.e[1];
    return e;
  }();
  static constexpr bool prologue = false;  // read from memory

  I indices;
  W weight;
  std::uint64_t id = detail::next_node_id();
  Index<rank> shape_;

  Embedding(I i, W w) : indices(std::move(i)), weight(std::move(w)) {
    for (int d = 0; d < I::rank; ++d) shape_[d] = indices.shape()[d];
    shape_[rank - 1] = weight.shape()[1];
  }
  Index<rank> const& shape() const { return shape_; }
  static std::string name() { return "embedding"; }
  // The value of a one-element expression (torch's .item()): evaluates it first.
  auto item() const { return eval(*this).item(); }
  template <std::size_t K>
    requires(K < 2)
  auto const& child() const {
    if constexpr (K == 0) return indices;
    else return weight;
  }
  template <std::size_t K>
    requires(K < 2)
  auto& child() {
    if constexpr (K == 0) return indices;
    else return weight;
  }
  template <class KI, class KW>
  auto rebuild(KI const& ki, KW const& kw) const {
    Embedding<node_t<KI>, node_t<KW>> e(as_node(ki), as_node(kw));
    e.id = id;
    return e;
  }
};

// torch.nn.functional.embedding(input, weight): out[..., :] = weight[input[...], :]. An index
// outside [0, num_embeddings) is an sd::Error when the kernel runs (PyTorch's IndexError).
template <Lazy X, Lazy W>
auto embedding(X const& indices, W const& weight) {
  return Embedding<node_t<X>, node_t<W>>(as_node(indices), as_node(weight));
}

}  // namespace solder
