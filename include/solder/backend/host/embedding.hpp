// The host engine of embedding (expr/embedding.hpp): every index checked, then each output row,
// the weight's row itself where it is contiguous, handed to the kernel's epilogue.
#pragma once
#include <string>
#include <vector>

#include "../../expr/embedding.hpp"
#include "contract.hpp"

namespace solder::detail::host {

template <class I, class W>
struct AnchorEngine<Embedding<I, W>> {
  template <class OutTensor, class Ev>
  static void run(Embedding<I, W> const& anchor, OutTensor& out, Ev& ev, Temps&) {
    constexpr int D = OutTensor::rank, RI = I::rank;
    using T = typename Embedding<I, W>::value_type;
    auto const idx = in_memory(anchor.indices);
    auto const w = in_memory(anchor.weight);
    std::int64_t const rows = w.shape()[0], dim = w.shape()[1];
    // The indices' offsets, in the output's row order, each checked.
    std::int64_t const n = numel_of<RI>(idx.shape());
    std::vector<std::int64_t> at(static_cast<std::size_t>(n));
    Index<RI> i{};
    for (std::int64_t r = 0; r < n; ++r) {
      auto const v = static_cast<std::int64_t>(idx.data()[dot<RI>(i, idx.strides())]);
      check(v >= 0 && v < rows, "embedding: index ", v, " is out of range for a weight of shape ",
            shape_string<2>(w.shape()), " (indices must be in [0, ", rows, "))");
      at[static_cast<std::size_t>(r)] = v;
      for (int a = RI - 1; a >= 0; --a) {
        if (++i[a] < idx.shape()[a]) break;
        i[a] = 0;
      }
    }
    BlockLayout<D> l;
    l.shape = out.shape();
    l.batch_dims = RI > 0 ? RI - 1 : 0;
    l.row = RI > 0 ? RI - 1 : -1;
    l.col = D - 1;
    for (int a = 0; a < l.batch_dims; ++a) l.batch *= l.shape[a];
    std::int64_t const per_batch = RI > 0 ? idx.shape()[RI - 1] : 1;
    auto run = epilogue_run<T>(ev, out, l);
    auto const store = &store_block<Ev, typename OutTensor::value_type, T, D>;
    bool const in_place = dim <= 1 || w.strides()[1] == 1;
    bool const parallel = n * dim >= parallel_threshold && get_num_threads() > 1;
    SOLDER_OMP(parallel if(parallel)) {
      std::vector<T> row(in_place ? 0 : static_cast<std::size_t>(dim));
      SOLDER_OMP(for schedule(static))
      for (std::int64_t r = 0; r < n; ++r) {
        T const* src = w.data() + at[static_cast<std::size_t>(r)] * w.strides()[0];
        if (!in_place) {
          for (std::int64_t j = 0; j < dim; ++j) row[static_cast<std::size_t>(j)] = src[j * w.strides()[1]];
          src = row.data();
        }
        store(&run, r / per_batch, r % per_batch, 0, 1, dim, src, dim);
      }
    }
  }
};

// embedding's backward: table[index[r], :] += rows[r, :] for every r (contiguous rows of `dim`,
// a contiguous table of `entries` rows), a scatter-add. Each table row sums the rows that pick
// it in their order (a counting sort groups them), and threads share out table rows, never one
// row: the same bits for any thread count.
template <class T>
void add_rows_at(std::int64_t const* index, std::int64_t n, T const* rows, std::int64_t dim, T* table,
                 std::int64_t entries) {
  std::vector<std::int64_t> first(static_cast<std::size_t>(entries + 1), 0), order(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < n; ++r) {
    check(index[r] >= 0 && index[r] < entries, "embedding backward: index ", index[r], " is out of range for ",
          entries, " rows");
    ++first[static_cast<std::size_t>(index[r] + 1)];
  }
  for (std::int64_t v = 0; v < entries; ++v) first[static_cast<std::size_t>(v + 1)] += first[static_cast<std::size_t>(v)];
  std::vector<std::int64_t> next(first.begin(), first.end() - 1);
  for (std::int64_t r = 0; r < n; ++r) order[static_cast<std::size_t>(next[static_cast<std::size_t>(index[r])]++)] = r;
  bool const parallel = n * dim >= parallel_threshold && get_num_threads() > 1;
  SOLDER_OMP(parallel for schedule(static) if(parallel))
  for (std::int64_t v = 0; v < entries; ++v) {
    T* out = table + v * dim;
    for (std::int64_t k = first[static_cast<std::size_t>(v)]; k < first[static_cast<std::size_t>(v + 1)]; ++k) {
      T const* in = rows + order[static_cast<std::size_t>(k)] * dim;
      SOLDER_SIMD
      for (std::int64_t j = 0; j < dim; ++j) out[j] += in[j];
    }
  }
}

}  // namespace solder::detail::host
