// Contract<A, B>: a matrix product with torch.matmul's rules — a kernel anchor (rule 3). The
// element-wise expression over it (bias, scale, activation, residual add) runs on each tile of
// its output before the tile is stored: `relu(linear(x, w, b))` is one kernel. Its operands are
// read from memory: an operand that is an expression is materialized first (its own kernels).
//
// Shapes, as torch.matmul: [K] x [K] is a number; [K] x [..., K, N] is [..., N]; [..., M, K] x
// [K] is [..., M]; [..., M, K] x [..., K, N] is [..., M, N], the batch dims broadcast.
#pragma once
#include <algorithm>
#include <string>

#include "pack_cache.hpp"
#include "view.hpp"

namespace solder {

namespace detail {

constexpr int matmul_rank(int ra, int rb) {
  if (ra == 1 && rb == 1) return 0;
  if (ra == 1) return rb - 1;
  if (rb == 1) return ra - 1;
  return ra > rb ? ra : rb;
}

// The output shape from the operands' (sizes, or static extents with dyn): the batch dims
// broadcast, then M (absent for a vector on the left), then N (absent for a vector on the right).
template <std::size_t NA, std::size_t NB, int RA = int(NA), int RB = int(NB)>
constexpr std::array<std::int64_t, matmul_rank(RA, RB)> matmul_shape(std::array<std::int64_t, NA> a,
                                                                     std::array<std::int64_t, NB> b) {
  constexpr int R = matmul_rank(RA, RB);
  std::array<std::int64_t, R> out{};
  constexpr int mats = (RA > 1) + (RB > 1);  // matrix dims of the output
  constexpr int batch = R - mats;
  for (int i = 0; i < batch; ++i) {
    int ia = i - (batch - (RA - 2)), ib = i - (batch - (RB - 2));
    std::int64_t x = RA > 2 && ia >= 0 ? a[ia] : 1, y = RB > 2 && ib >= 0 ? b[ib] : 1;
    out[i] = x == 1 ? y : y == 1 ? x : x == dyn ? y : x;
  }
  int o = batch;
  if constexpr (RA > 1) out[o++] = a[RA - 2];
  if constexpr (RB > 1) out[o] = b[RB - 1];
  return out;
}

// The inner dims, and the batch dims where both are known, must agree.
template <std::size_t NA, std::size_t NB, int RA = int(NA), int RB = int(NB)>
constexpr bool matmul_static_ok(std::array<std::int64_t, NA> a, std::array<std::int64_t, NB> b) {
  std::int64_t ka = a[RA - 1], kb = RB > 1 ? b[RB - 2] : b[0];
  if (ka != dyn && kb != dyn && ka != kb) return false;
  constexpr int batch = matmul_rank(RA, RB) - (RA > 1) - (RB > 1);
  for (int i = 0; i < batch; ++i) {
    int ia = i - (batch - (RA - 2)), ib = i - (batch - (RB - 2));
    std::int64_t x = RA > 2 && ia >= 0 ? a[ia] : 1, y = RB > 2 && ib >= 0 ? b[ib] : 1;
    if (x != dyn && y != dyn && x != y && x != 1 && y != 1) return false;
  }
  return true;
}

template <auto E>
constexpr std::array<std::int64_t, rank_of<E>> extents_array() {
  std::array<std::int64_t, rank_of<E>> a{};
  for (int i = 0; i < rank_of<E>; ++i) a[i] = E.e[i];
  return a;
}

// The first message of a static shape error names the op, and the instantiation context both
// operands' extents.
template <auto EA, auto EB>
constexpr bool check_matmul_extents() {
  static_assert(matmul_static_ok(extents_array<EA>(), extents_array<EB>()),
                "solder: matmul: the operands' static shapes cannot be multiplied (the inner "
                "dims differ, or the batch dims do not broadcast); mm, bmm and linear check as matmul");
  return true;
}

// linear(x, w): x's last dim and w's (in_features), where both are static, agree.
template <auto EX, auto EW>
constexpr bool check_linear_extents() {
  constexpr std::int64_t in_x = EX.e[rank_of<EX> - 1], in_w = EW.e[1];
  static_assert(in_x == dyn || in_w == dyn || in_x == in_w,
                "solder: linear: the input's last static dim differs from in_features, the weight's "
                "[out_features, in_features] last");
  return true;
}

template <auto EA, auto EB>
constexpr auto matmul_extents() {
  constexpr auto s = matmul_shape(extents_array<EA>(), extents_array<EB>());
  constexpr int R = static_cast<int>(s.size());
  Extents<R> e{};
  for (int i = 0; i < R; ++i) e.e[i] = s[i];  // (int: nvcc warns of an unsigned i < 0 for R = 0)
  return e;
}

}  // namespace detail

template <class A, class B>
struct Contract : detail::ExprTag {
  static constexpr NodeKind kind = NodeKind::contract;
  using child_types = types<A, B>;
  using value_type = typename A::value_type;
  using device_type = typename detail::device_join<typename A::device_type, typename B::device_type>::type;
  static constexpr int rank = detail::matmul_rank(A::rank, B::rank);
  static_assert(A::rank >= 1 && B::rank >= 1, "solder: matmul: both operands need at least one dim");
  static_assert(std::is_same_v<typename A::value_type, typename B::value_type>,
                "solder: matmul: the operands' element types differ (PyTorch refuses it too): "
                "cast one with sd::cast<T>");
  // 16-bit floats: on sd::Cuda tensors only (cuBLAS, with float accumulation); the host's
  // GEMM engine computes in float and double.
  static_assert(std::is_same_v<value_type, float> || std::is_same_v<value_type, double> ||
                    (detail::is_half_v<value_type> && std::is_same_v<device_type, Cuda>),
                "solder: matmul: float and double operands only (sd::half and sd::bfloat16 on "
                "sd::Cuda tensors)");
  static_assert(detail::devices_agree<typename A::device_type, typename B::device_type>(),
                "solder: matmul: operands live on different devices (sd::Host and sd::Cuda)");
  static_assert(detail::check_matmul_extents<A::static_extents, B::static_extents>());
  static constexpr auto static_extents = detail::matmul_extents<A::static_extents, B::static_extents>();
  static constexpr bool prologue = true;  // the engine computes an element-wise A while packing it

  A a;
  B b;
  char const* op;  // the function the user called, for errors and explain()
  std::uint64_t id = detail::next_node_id();
  Index<rank> shape_;
  std::shared_ptr<detail::PackCache> b_pack;  // b packed once for the engine (a module's weight), or null

  Contract(A x, B y, char const* name) : a(std::move(x)), b(std::move(y)), op(name) {
    auto const& sa = a.shape();  // (one declaration each: their types differ, which nvcc refuses)
    auto const& sb = b.shape();
    std::int64_t ka = sa[A::rank - 1], kb = B::rank > 1 ? sb[B::rank - 2] : sb[0];
    constexpr int batch = rank - (A::rank > 1) - (B::rank > 1);
    bool ok = ka == kb;
    for (int i = 0; i < batch; ++i) {
      int ia = i - (batch - (A::rank - 2)), ib = i - (batch - (B::rank - 2));
      std::int64_t x = A::rank > 2 && ia >= 0 ? sa[ia] : 1, y = B::rank > 2 && ib >= 0 ? sb[ib] : 1;
      ok = ok && (x == y || x == 1 || y == 1);
    }
    detail::check(ok, op, ": shapes ", shape_string<A::rank>(sa), " and ", shape_string<B::rank>(sb),
                  " cannot be multiplied (", ka == kb ? "the batch dims do not broadcast" : "the inner dims differ", ")");
    shape_ = detail::matmul_shape(sa, sb);
  }
  Index<rank> const& shape() const { return shape_; }
  std::string name() const { return op; }
  // The value of a one-element expression (torch's .item()): evaluates it first.
  auto item() const { return eval(*this).item(); }
  template <std::size_t I>
    requires(I < 2)
  auto const& child() const {
    if constexpr (I == 0) return a;
    else return b;
  }
  template <std::size_t I>
    requires(I < 2)
  auto& child() {
    if constexpr (I == 0) return a;
    else return b;
  }
  template <class KA, class KB>
  auto rebuild(KA const& ka, KB const& kb) const {
    Contract<node_t<KA>, node_t<KB>> c(as_node(ka), as_node(kb), op);
    c.id = id;
    c.b_pack = b_pack;
    return c;
  }
};

namespace detail {
// Whether N is a matrix product (matmul, mm, bmm, linear), not another contraction-kind anchor.
template <class N>
inline constexpr bool is_matmul = false;
template <class A, class B>
inline constexpr bool is_matmul<Contract<A, B>> = true;

template <class XA, class XB>
auto contract(XA const& a, XB const& b, char const* op) {
  return Contract<node_t<XA>, node_t<XB>>(as_node(a), as_node(b), op);
}
}  // namespace detail

// torch.matmul: vectors, matrices and batches of them, the batch dims broadcast.
template <Lazy XA, Lazy XB>
auto matmul(XA const& a, XB const& b) {
  return detail::contract(a, b, "matmul");
}

// torch.mm: two matrices.
template <Lazy XA, Lazy XB>
auto mm(XA const& a, XB const& b) {
  static_assert(node_t<XA>::rank == 2 && node_t<XB>::rank == 2, "solder: mm: both operands must be matrices");
  return detail::contract(a, b, "mm");
}

// torch.bmm: two batches of matrices of the same batch size (no broadcasting).
template <Lazy XA, Lazy XB>
auto bmm(XA const& a, XB const& b) {
  static_assert(node_t<XA>::rank == 3 && node_t<XB>::rank == 3, "solder: bmm: both operands must be 3-D");
  detail::check(a.shape()[0] == b.shape()[0], "bmm: batch sizes differ: shapes ",
                shape_string<3>(a.shape()), " and ", shape_string<3>(b.shape()));
  return detail::contract(a, b, "bmm");
}

// torch.nn.functional.linear: x [..., in] times the weight [out, in] transposed, plus an
// optional bias [out] (an element-wise add: the contraction's epilogue).
template <Lazy X, Lazy W>
auto linear(X const& x, W const& w) {
  static_assert(node_t<W>::rank == 2, "solder: linear: the weight must be [out_features, in_features]");
  static_assert(node_t<X>::rank >= 1, "solder: linear: the input needs a last dim of in_features");
  static_assert(detail::check_linear_extents<node_t<X>::static_extents, node_t<W>::static_extents>());
  return detail::contract(x, transpose(w, 0, 1), "linear");
}
template <Lazy X, Lazy W, Lazy Bias>
auto linear(X const& x, W const& w, Bias const& bias) {
  static_assert(node_t<Bias>::rank == 1, "solder: linear: the bias must be [out_features]");
  detail::check(bias.shape()[0] == w.shape()[0], "linear: bias of shape ", shape_string<1>(bias.shape()),
                " for a weight of shape ", shape_string<2>(w.shape()));
  return linear(x, w) + bias;
}

}  // namespace solder
