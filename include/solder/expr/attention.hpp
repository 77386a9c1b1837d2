// Attention<Q, K, V[, M]>: torch.nn.functional.scaled_dot_product_attention, a kernel anchor of
// the contraction kind (rule 3): the element-wise expression over it runs on each block of its
// output before the block is stored (`sdpa(q, k, v) * 2 + x` is one kernel). Its engine
// (backend/host/attention.hpp; on sd::Cuda tensors backend/cuda/attention.hpp) reads the operands
// from memory, an expression materialized first.
//
// Shapes, as PyTorch: q [..., L, E], k [..., S, E], v [..., S, Ev] give [..., L, Ev], the batch
// dims of q, k and v broadcast; the optional mask (a 4th child: bool, true = takes part, or of
// q's element type, added to the scores) broadcasts to [..., L, S] without adding batch dims.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>

#include "contract.hpp"
#include "map.hpp"
#include "share.hpp"

namespace solder {

namespace detail {

// Extent of output batch axis i (of nb) of an operand of rank R whose last `core` dims are not
// batch dims: right-aligned, 1 where the operand has no such axis.
template <std::size_t R>
constexpr std::int64_t batch_extent(std::array<std::int64_t, R> const& s, int core, int nb, int i) {
  int a = i - (nb - (static_cast<int>(R) - core));
  return static_cast<int>(R) > core && a >= 0 ? s[static_cast<std::size_t>(a)] : 1;
}
// Two extents that broadcast (dyn: unknown); 0 marks a mismatch.
constexpr std::int64_t broadcast_extent(std::int64_t x, std::int64_t y) {
  if (x == 1) return y;
  if (y == 1) return x;
  if (x == dyn) return y;
  if (y == dyn) return x;
  return x == y ? x : 0;
}

// The output shape (batch, L, Ev) from q, k and v's sizes or static extents; an extent 0 in the
// batch where they do not broadcast.
template <std::size_t RQ, std::size_t RK, std::size_t RV>
constexpr auto attention_shape(std::array<std::int64_t, RQ> const& q, std::array<std::int64_t, RK> const& k,
                               std::array<std::int64_t, RV> const& v) {
  constexpr int D = static_cast<int>(std::max({RQ, RK, RV}));
  std::array<std::int64_t, D> out{};
  for (int i = 0; i < D - 2; ++i)
    out[i] = broadcast_extent(broadcast_extent(batch_extent(q, 2, D - 2, i), batch_extent(k, 2, D - 2, i)),
                              batch_extent(v, 2, D - 2, i));
  out[D - 2] = q[RQ - 2];
  out[D - 1] = v[RV - 1];
  return out;
}

// What is wrong with the shapes (sizes, or static extents with dyn), or nullptr.
template <std::size_t RQ, std::size_t RK, std::size_t RV>
constexpr char const* attention_mismatch(std::array<std::int64_t, RQ> const& q, std::array<std::int64_t, RK> const& k,
                                         std::array<std::int64_t, RV> const& v) {
  auto differ = [](std::int64_t x, std::int64_t y) { return x != dyn && y != dyn && x != y; };
  if (differ(q[RQ - 1], k[RK - 1])) return "the query's and the key's last dims (E) differ";
  if (differ(k[RK - 2], v[RV - 2])) return "the key's and the value's sequence dims (S, the second-last) differ";
  auto const out = attention_shape(q, k, v);
  for (std::size_t i = 0; i + 2 < out.size(); ++i)
    if (out[i] == 0) return "the batch dims of query, key and value do not broadcast";
  return nullptr;
}
// Whether a mask of shape m broadcasts to [..., L, S] of the output's batch without adding dims.
template <std::size_t RM, std::size_t D>
constexpr bool attention_mask_fits(std::array<std::int64_t, RM> const& m, std::array<std::int64_t, D> const& out,
                                   std::int64_t s) {
  if (RM > D) return false;
  auto fits = [](std::int64_t x, std::int64_t want) { return x == 1 || x == dyn || want == dyn || x == want; };
  bool ok = fits(m[RM - 1], s);
  if constexpr (RM >= 2) ok = ok && fits(m[RM - 2], out[D - 2]);
  for (std::size_t i = 0; i + 2 < RM; ++i) ok = ok && fits(m[i], out[D - RM + i]);
  return ok;
}

template <auto EQ, auto EK, auto EV>
constexpr bool check_attention_extents() {
  constexpr auto q = extents_array<EQ>();
  constexpr auto k = extents_array<EK>();
  constexpr auto v = extents_array<EV>();
  static_assert(q[q.size() - 1] == dyn || k[k.size() - 1] == dyn || q[q.size() - 1] == k[k.size() - 1],
                "solder: scaled_dot_product_attention: the query's and the key's last dims (E) differ");
  static_assert(k[k.size() - 2] == dyn || v[v.size() - 2] == dyn || k[k.size() - 2] == v[v.size() - 2],
                "solder: scaled_dot_product_attention: the key's and the value's sequence dims (S, the "
                "second-last) differ");
  static_assert(attention_mismatch(q, k, v) == nullptr,
                "solder: scaled_dot_product_attention: the batch dims of query, key and value do not "
                "broadcast");
  return true;
}
template <auto EQ, auto EK, auto EV, auto EM>
constexpr bool check_attention_mask_extents() {
  constexpr auto k = extents_array<EK>();
  static_assert(attention_mask_fits(extents_array<EM>(), attention_shape(extents_array<EQ>(), k, extents_array<EV>()),
                                    k[k.size() - 2]),
                "solder: scaled_dot_product_attention: the attn_mask's static shape does not broadcast "
                "to [..., L, S] (it may not add batch dims)");
  return true;
}

template <auto EQ, auto EK, auto EV>
constexpr auto attention_extents() {
  constexpr auto s = attention_shape(extents_array<EQ>(), extents_array<EK>(), extents_array<EV>());
  Extents<static_cast<int>(s.size())> e{};
  for (std::size_t i = 0; i < s.size(); ++i) e.e[i] = s[i];
  return e;
}

}  // namespace detail

// torch.nn.functional.scaled_dot_product_attention's keyword arguments (the mask is positional,
// as PyTorch's attn_mask: C++ cannot deduce its type from a braced list). No dropout: inference.
struct AttentionOptions {
  bool is_causal = false;       // masks key j > query i (the lower triangle of [L, S], top-left)
  std::optional<double> scale = std::nullopt;  // of the scores; 1 / sqrt(E) when not given
};

template <class Q, class K, class V, class... M>
struct Attention : detail::ExprTag {
  static_assert(sizeof...(M) <= 1, "solder: scaled_dot_product_attention: at most one attn_mask");
  static constexpr NodeKind kind = NodeKind::contract;
  using child_types = types<Q, K, V, M...>;
  using value_type = typename Q::value_type;
  using device_type = typename detail::device_join<typename Q::device_type, typename K::device_type,
                                                   typename V::device_type, typename M::device_type...>::type;
  static constexpr int rank = std::max({Q::rank, K::rank, V::rank});
  static constexpr bool masked = sizeof...(M) == 1;
  static constexpr bool prologue = false;  // the engine reads every operand from memory

  static_assert(Q::rank >= 2 && K::rank >= 2 && V::rank >= 2,
                "solder: scaled_dot_product_attention: query, key and value need at least 2 dims");
  static_assert(std::is_same_v<value_type, typename K::value_type> &&
                    std::is_same_v<value_type, typename V::value_type>,
                "solder: scaled_dot_product_attention: query, key and value have different element "
                "types (PyTorch refuses it too): cast with sd::cast<T>");
  // 16-bit floats: on sd::Cuda tensors only (computed in float there).
  static_assert(std::is_same_v<value_type, float> || std::is_same_v<value_type, double> ||
                    (detail::is_half_v<value_type> && std::is_same_v<device_type, Cuda>),
                "solder: scaled_dot_product_attention: float and double operands only (sd::half and "
                "sd::bfloat16 on sd::Cuda tensors)");
  static_assert((true && ... && (std::is_same_v<typename M::value_type, bool> ||
                                 std::is_same_v<typename M::value_type, value_type>)),
                "solder: scaled_dot_product_attention: the attn_mask must be bool or of the query's "
                "element type (as PyTorch)");
  static_assert((true && ... && (M::rank >= 1 && M::rank <= rank)),
                "solder: scaled_dot_product_attention: the attn_mask needs 1 to rank(output) dims");
  static_assert(detail::devices_agree<typename Q::device_type, typename K::device_type, typename V::device_type,
                                      typename M::device_type...>(),
                "solder: scaled_dot_product_attention: operands live on different devices");
  static_assert(detail::check_attention_extents<Q::static_extents, K::static_extents, V::static_extents>());
  static_assert((true && ... &&
                 detail::check_attention_mask_extents<Q::static_extents, K::static_extents, V::static_extents,
                                                      M::static_extents>()));
  static constexpr auto static_extents =
      detail::attention_extents<Q::static_extents, K::static_extents, V::static_extents>();

  std::tuple<Q, K, V, M...> operands;
  double scale;  // of the scores, resolved (1 / sqrt(E) by default)
  bool is_causal;
  // A row no key takes part in: NaN, as softmax makes it, where the attention pattern was
  // written out by hand (below); else 0, as PyTorch's scaled_dot_product_attention.
  bool empty_rows_nan = false;
  std::uint64_t id = detail::next_node_id();
  Index<rank> shape_;

  Attention(AttentionOptions const& o, Q q, K k, V v, M... m)
      : operands(std::move(q), std::move(k), std::move(v), std::move(m)...), is_causal(o.is_causal) {
    auto const& sq = child<0>().shape();  // (one declaration each: their types may differ, which nvcc
    auto const& sk = child<1>().shape();  // refuses in one)
    auto const& sv = child<2>().shape();
    if (char const* bad = detail::attention_mismatch(sq, sk, sv))
      detail::fail("scaled_dot_product_attention: query ", shape_string<Q::rank>(sq), ", key ",
                   shape_string<K::rank>(sk), " and value ", shape_string<V::rank>(sv), ": ", bad);
    detail::check(!(masked && o.is_causal),
                  "scaled_dot_product_attention: an explicit attn_mask should not be set when is_causal is "
                  "true (as PyTorch)");
    shape_ = detail::attention_shape(sq, sk, sv);
    if constexpr (masked) {
      constexpr int RM = std::tuple_element_t<3, decltype(operands)>::rank;
      auto const& sm = child<3>().shape();
      Index<rank> scores = shape_;  // [..., L, S]
      scores[rank - 1] = sk[K::rank - 2];
      detail::check(detail::attention_mask_fits(sm, shape_, scores[rank - 1]),
                    "scaled_dot_product_attention: attn_mask ", shape_string<RM>(sm),
                    " does not broadcast to the scores ", shape_string<rank>(scores),
                    " ([..., L, S]; it may not add batch dims)");
    }
    scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(sq[Q::rank - 1]));
  }
  Index<rank> const& shape() const { return shape_; }
  static std::string name() { return "scaled_dot_product_attention"; }
  // Its arguments other than PyTorch's defaults, for explain().
  std::string options() const {
    std::ostringstream os;
    if (is_causal) os << "is_causal";
    if (scale != 1.0 / std::sqrt(static_cast<double>(child<0>().shape()[Q::rank - 1])))
      os << (is_causal ? ", " : "") << "scale=" << scale;
    return os.str();
  }
  // The value of a one-element expression (torch's .item()): evaluates it first.
  auto item() const { return eval(*this).item(); }
  template <std::size_t I>
    requires(I < 3 + sizeof...(M))
  auto const& child() const {
    return std::get<I>(operands);
  }
  template <std::size_t I>
    requires(I < 3 + sizeof...(M))
  auto& child() {
    return std::get<I>(operands);
  }
  template <class KQ, class KK, class KV, class... KM>
  auto rebuild(KQ const& q, KK const& k, KV const& v, KM const&... m) const {
    Attention<node_t<KQ>, node_t<KK>, node_t<KV>, node_t<KM>...> a({is_causal, scale}, as_node(q), as_node(k),
                                                                    as_node(v), as_node(m)...);
    a.id = id;
    a.empty_rows_nan = empty_rows_nan;
    return a;
  }
};

// torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=..., scale=...).
template <Lazy XQ, Lazy XK, Lazy XV>
auto scaled_dot_product_attention(XQ const& q, XK const& k, XV const& v, AttentionOptions const& o = {}) {
  return Attention<node_t<XQ>, node_t<XK>, node_t<XV>>(o, as_node(q), as_node(k), as_node(v));
}
// ... with attn_mask: bool (true = takes part) or of q's element type (added to the scores).
template <Lazy XQ, Lazy XK, Lazy XV, Lazy XM>
auto scaled_dot_product_attention(XQ const& q, XK const& k, XV const& v, XM const& attn_mask,
                                  AttentionOptions const& o = {}) {
  return Attention<node_t<XQ>, node_t<XK>, node_t<XV>, node_t<XM>>(o, as_node(q), as_node(k), as_node(v),
                                                                   as_node(attn_mask));
}

// ---- the attention pattern written out by hand ------------------------------------------------
//
// matmul(softmax(scores, -1), v), the scores matmul(q, b) [* s | s * | / s] [+ mask]: the planner
// runs it as scaled_dot_product_attention(q, b^T, v[, mask], {.scale}), one kernel that never
// stores the [L, S] scores (plan.hpp: plan_own; backend/assign.hpp: run_kernel), and explain
// names the rewrite. The rewrite applies where, at run time, the softmax is over the last dim
// and the mask broadcasts to the scores without adding batch dims; elsewhere the expression runs
// as written (more kernels, like a run-time break). A row whose scores are all -inf is NaN, as
// softmax makes it.
namespace detail {

template <class N>
struct unshared {
  static N const& of(N const& n) { return n; }
};
template <class C>
struct unshared<Shared<C>> {
  static C const& of(Shared<C> const& n) { return *n.input; }
};

// Scores: a product of matrices, scaled by a number or not, plus a mask or not.
template <class X>
struct score_parts {
  static constexpr bool value = false, masked = false;
};
template <class Q, class B>
struct score_parts<Contract<Q, B>> {
  static constexpr bool value = Q::rank >= 2 && B::rank >= 2, masked = false;
  using q_type = Q;
  using b_type = B;
  static Contract<Q, B> const& product(Contract<Q, B> const& x) { return x; }
  static double scale(Contract<Q, B> const&) { return 1; }
};
template <class Q, class B, class T>
struct score_parts<Map<ops::Mul, Contract<Q, B>, Scalar<T>>> : score_parts<Contract<Q, B>> {
  static Contract<Q, B> const& product(auto const& x) { return x.template child<0>(); }
  static double scale(auto const& x) { return static_cast<double>(x.template child<1>().value); }
};
template <class Q, class B, class T>
struct score_parts<Map<ops::Mul, Scalar<T>, Contract<Q, B>>> : score_parts<Contract<Q, B>> {
  static Contract<Q, B> const& product(auto const& x) { return x.template child<1>(); }
  static double scale(auto const& x) { return static_cast<double>(x.template child<0>().value); }
};
template <class Q, class B, class T>
struct score_parts<Map<ops::Div, Contract<Q, B>, Scalar<T>>> : score_parts<Contract<Q, B>> {
  static Contract<Q, B> const& product(auto const& x) { return x.template child<0>(); }
  static double scale(auto const& x) { return 1 / static_cast<double>(x.template child<1>().value); }
};
// scores + mask or mask + scores. Which side is which, and whether the sum is scores at all, is
// decided first: a sum that is not (softmax(x + y), softmax(x + 1.f)) must stay an ordinary sum,
// so the parts that only scores have are declared only where it is.
template <class L, class R>
struct masked_score_sides {
  static constexpr bool left = score_parts<L>::value && !score_parts<L>::masked;  // L + mask, else mask + R
  using Unmasked = std::conditional_t<left, L, R>;
  using Mask = std::conditional_t<left, R, L>;
  static constexpr bool value = score_parts<Unmasked>::value && !score_parts<Unmasked>::masked &&
                                Mask::kind != NodeKind::scalar && Mask::rank <= Unmasked::rank &&
                                std::is_same_v<typename Mask::value_type, typename Unmasked::value_type>;
};
template <class L, class R, bool = masked_score_sides<L, R>::value>
struct masked_score_parts {
  static constexpr bool value = false, masked = false;
};
template <class L, class R>
struct masked_score_parts<L, R, true> : masked_score_sides<L, R> {
  using typename masked_score_sides<L, R>::Unmasked;
  using typename masked_score_sides<L, R>::Mask;
  static constexpr bool left = masked_score_sides<L, R>::left;
  static constexpr bool masked = true;
  using q_type = typename score_parts<Unmasked>::q_type;
  using b_type = typename score_parts<Unmasked>::b_type;
  static Unmasked const& unmasked(auto const& x) { return x.template child<left ? 0 : 1>(); }
  static Mask const& mask(auto const& x) { return x.template child<left ? 1 : 0>(); }
  static auto const& product(auto const& x) { return score_parts<Unmasked>::product(unmasked(x)); }
  static double scale(auto const& x) { return score_parts<Unmasked>::scale(unmasked(x)); }
};
template <class L, class R>
struct score_parts<Map<ops::Add, L, R>> : masked_score_parts<L, R> {};

// softmax(x, dim) or softmax<Dim>(x) (expr/rows.hpp: exp(x - row_max) scaled by ops::SoftmaxScale).
template <class A>
struct softmax_parts {
  static constexpr bool value = false;
};
template <class S, class R>
struct softmax_parts<Map<ops::SoftmaxScale, S, R>> {
  static constexpr bool value = true;
  static auto const& shifted(Map<ops::SoftmaxScale, S, R> const& a) {  // x - row_max(x)
    return a.template child<0>().template child<0>();
  }
  static auto const& scores(Map<ops::SoftmaxScale, S, R> const& a) {
    return unshared<std::remove_cvref_t<decltype(shifted(a).template child<0>())>>::of(shifted(a).template child<0>());
  }
  static int dim(Map<ops::SoftmaxScale, S, R> const& a) { return shifted(a).template child<1>().axes[0]; }
};

template <class N>
struct attention_pattern {
  static constexpr bool value = false;
};
template <class A, class V>
  requires(softmax_parts<A>::value)
struct attention_pattern<Contract<A, V>> {
  using Product = Contract<A, V>;
  using X = std::remove_cvref_t<decltype(softmax_parts<A>::scores(std::declval<A const&>()))>;
  using Parts = score_parts<X>;
  using T = typename Product::value_type;

  // The attention node (the pattern known to hold, at compile time and at run time).
  static auto make(Product const& n) {
    auto const& x = softmax_parts<A>::scores(n.a);
    auto const& product = Parts::product(x);
    auto k = as_node(transpose(product.b, -2, -1));
    AttentionOptions const o{.scale = Parts::scale(x)};
    auto attention = [&] {
      if constexpr (Parts::masked)
        return scaled_dot_product_attention(product.a, k, n.b, Parts::mask(x), o);
      else
        return scaled_dot_product_attention(product.a, k, n.b, o);
    }();
    attention.empty_rows_nan = true;
    return attention;
  }
  static constexpr bool holds() {
    if constexpr (!Parts::value || A::rank < 2 || V::rank < 2) {
      return false;
    } else {
      using Q = typename Parts::q_type;
      using B = typename Parts::b_type;
      return std::max({Q::rank, B::rank, V::rank}) == Product::rank && std::is_same_v<typename Q::value_type, T> &&
             std::is_same_v<typename B::value_type, T> && std::is_same_v<typename V::value_type, T> &&
             (std::is_same_v<T, float> || std::is_same_v<T, double> ||
              (is_half_v<T> && std::is_same_v<typename Product::device_type, Cuda>));
    }
  }
  static constexpr bool value = holds();
  // Whether the rewrite applies to these shapes: the softmax over the last dim, the mask fitting.
  static bool applies(Product const& n) {
    auto const& x = softmax_parts<A>::scores(n.a);
    if (softmax_parts<A>::dim(n.a) != X::rank - 1) return false;
    if constexpr (Parts::masked)
      return attention_mask_fits(Parts::mask(x).shape(), n.shape(), x.shape()[X::rank - 1]);
    return true;
  }
};

}  // namespace detail

}  // namespace solder
