// What a planned kernel is and what it costs, for a profile of a forward (a Tracer's
// kernel_cost, backend/assign.hpp): its kind (the anchor's: a convolution by its window and
// groups, a product, attention, a pool, a gather; else a row kernel when it folds, else
// element-wise), its flops (2 per multiply-add of its anchor; 0 for the others) and the bytes it
// moves at least: its output and each distinct tensor its expression reads, once. Computed only
// for a traced kernel.
#pragma once
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../expr/attention.hpp"
#include "../expr/contract.hpp"
#include "../expr/conv.hpp"
#include "../expr/embedding.hpp"
#include "../plan/plan.hpp"

namespace solder::detail {

enum class KernelKind { conv_kxk, conv_1x1, depthwise, gemm, attention, rows, elementwise, pool, gather };
inline constexpr int kernel_kinds = 9;
inline constexpr std::string_view kernel_kind_names[kernel_kinds] = {
    "conv k x k", "conv 1 x 1", "depthwise", "GEMM", "attention", "row ops", "element-wise", "pools", "gather"};

struct KernelCost {
  KernelKind kind = KernelKind::elementwise;
  double flops = 0, bytes = 0;
};

// The anchor's kind and flops.
template <class A, class B>
void anchor_cost(Contract<A, B> const& c, KernelCost& k) {
  k.kind = KernelKind::gemm;
  k.flops = 2.0 * double(numel_of<Contract<A, B>::rank>(c.shape())) * double(c.a.shape()[A::rank - 1]);
}
template <class X, class W>
void anchor_cost(Conv2d<X, W> const& c, KernelCost& k) {
  if (c.output) return;  // stored already (BatchNorm2d's training forward): its epilogue alone runs
  auto const& w = c.w.shape();  // [out, in / groups, kH, kW]
  k.kind = c.groups > 1 && w[1] == 1 ? KernelKind::depthwise
           : w[2] == 1 && w[3] == 1  ? KernelKind::conv_1x1
                                     : KernelKind::conv_kxk;
  k.flops = 2.0 * double(numel_of<Conv2d<X, W>::rank>(c.shape())) * double(w[1] * w[2] * w[3]);
}
template <PoolKind P, class X>
void anchor_cost(Pool2d<P, X> const&, KernelCost& k) {
  k.kind = KernelKind::pool;
}
template <class I, class W>
void anchor_cost(Embedding<I, W> const&, KernelCost& k) {
  k.kind = KernelKind::gather;
}
template <class Q, class K, class V, class... M>
void anchor_cost(Attention<Q, K, V, M...> const& a, KernelCost& k) {
  using A = Attention<Q, K, V, M...>;
  auto const& q = a.template child<0>().shape();
  auto const& key = a.template child<1>().shape();
  double const ev = double(a.shape()[A::rank - 1]), s = double(key[K::rank - 2]), e = double(q[Q::rank - 1]);
  // scores (L x S x E) and their product with V (L x S x Ev) per head; a causal mask is not discounted
  k.kind = KernelKind::attention;
  k.flops = ev > 0 ? 2.0 * double(numel_of<A::rank>(a.shape())) / ev * s * (e + ev) : 0;
}

template <class N>
double read_bytes(N const& n, bool anchor, std::vector<void const*>& seen);

// The bytes the anchor reads of its operands: all of each, but for a gather, which reads the
// rows it picks (as many as it writes) and its indices.
template <class A>
double operand_bytes(A const& a, std::vector<void const*>& seen) {
  double sum = 0;
  for_each_child(a, [&](auto const& c) { sum += read_bytes(c, false, seen); });
  return sum;
}
template <class I, class W>
double operand_bytes(Embedding<I, W> const& e, std::vector<void const*>& seen) {
  return read_bytes(e.indices, false, seen) +
         double(numel_of<Embedding<I, W>::rank>(e.shape())) * sizeof(typename W::value_type);
}

// The bytes of the tensors n reads (`seen`: tensors counted already, by address). `anchor`: n
// is on the kernel's output path through element-wise nodes only, where a contraction is the
// anchor (its operands are read) rather than a result stored by an earlier kernel.
template <class N>
double read_bytes(N const& n, bool anchor, std::vector<void const*>& seen) {
  auto once = [&](void const* p, double bytes) {
    for (void const* s : seen)
      if (s == p) return 0.0;
    seen.push_back(p);
    return bytes;
  };
  if constexpr (N::kind == NodeKind::leaf) {
    return once(n.tensor.data(), double(n.tensor.numel()) * sizeof(typename N::value_type));
  } else if constexpr (N::kind == NodeKind::scalar) {
    return 0;
  } else {
    bool known = false;  // a contraction's output stored already (Conv2d::output): read, not computed
    if constexpr (requires { n.output; }) known = n.output != nullptr;
    bool const stored = N::kind == NodeKind::view || N::kind == NodeKind::shared ||
                        (N::kind == NodeKind::contract && (!anchor || known));
    if (stored) return double(numel_of<N::rank>(n.shape())) * sizeof(typename N::value_type);
    if constexpr (N::kind == NodeKind::contract) return operand_bytes(n, seen);
    bool const through = anchor && N::kind == NodeKind::map;
    double sum = 0;
    for_each_child(n, [&](auto const& c) { sum += read_bytes(c, through, seen); });
    return sum;
  }
}

template <class N>
KernelCost kernel_cost(N const& root) {
  constexpr int D = N::rank;
  KernelCost k;
  if constexpr (has_anchor<N>())
    with_anchor<D>(root, [&](auto const& a) { anchor_cost(a, k); });
  else if constexpr (N::kind == NodeKind::reduce || has_fused_reduce<N, D, false>())
    k.kind = KernelKind::rows;
  std::vector<void const*> seen;
  k.bytes = double(numel_of<D>(root.shape())) * sizeof(typename N::value_type) + read_bytes(root, has_anchor<N>(), seen);
  return k;
}

}  // namespace solder::detail
