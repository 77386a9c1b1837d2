// sd::value_and_grad(f)(x, w, ...) and sd::grad(f)(x, w, ...): the value of a function that
// returns a 0-d expression (a loss) and its gradient with respect to each argument, as
// torch.func.grad_and_value / JAX's value_and_grad. f is called once on the tensors; its
// expression is evaluated, then derived (derivatives.hpp), and each tensor that the expression
// reads and that is, or views, an argument takes its gradient: through the view's strides,
// summed where a broadcast or an expanded view read an element more than once.
//
//   auto loss = [](auto const& x, auto const& w, auto const& b) {
//     return sd::mean(sd::relu(sd::linear(x, w, b)));
//   };
//   auto [value, grads] = sd::value_and_grad(loss)(x, w, b);
//   auto [gx, gw, gb] = grads;                        // shapes of x, w and b
//
// f must return the expression, not a tensor it evaluated (sd::eval inside f cuts the
// derivation there, as .detach() would). What the forward stores (every matrix product, and
// the reductions that are breaks) the backward reads again in the same scope, not computing it
// again.
#pragma once
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "../backend/results.hpp"
#include "derivatives.hpp"

namespace solder {

namespace detail::autograd {

// The gradient of one argument: a zero-filled buffer over the elements the argument reaches,
// seen with the argument's own shape and strides, so that a tensor which views the argument
// views the same elements of the buffer.
template <class A>
struct ArgGrad {
  using T = typename A::value_type;
  using Device = typename A::device_type;
  A const& arg;
  std::int64_t lo;  // the lowest element the argument reaches, from its first
  BasicTensor<T, dynamic_extents<1>(), Device> buffer;
  BasicTensor<T, dynamic_extents<A::rank>(), Device> grad;

  explicit ArgGrad(A const& a)
      : arg(a),
        lo(a.numel() == 0 ? 0 : element_reach(a)[0]),
        buffer(zeros<T, Device>(solder::shape(a.numel() == 0 ? 0 : element_reach(a)[1] - lo + 1))),
        grad(BasicTensor<T, dynamic_extents<A::rank>(), Device>::template make_view<A::rank>(
            buffer.storage(), buffer.data() - lo, a.shape(), a.strides())) {}

  // Whether t is the argument or a view of its memory.
  template <class TT>
  bool holds(TT const& t) const {
    if (!same_storage(t.storage(), arg.storage()) || t.numel() == 0 || arg.numel() == 0) return false;
    auto const s = byte_span(t), a = byte_span(arg);
    return a[0] <= s[0] && s[1] <= a[1];
  }
  // The elements of the buffer that t's elements are of the argument's.
  template <class TT>
  auto view_of(TT const& t) const {
    std::int64_t const offset = t.data() - arg.data();
    return BasicTensor<T, dynamic_extents<TT::rank>(), Device>::template make_view<TT::rank>(
        buffer.storage(), grad.data() + offset, t.shape(), t.strides());
  }
};

// Context::accumulate's case of a d that repeats elements along some dims (stride 0): g is
// stored whole (by the kernel of d + g's type, so that a gradient compiles one kernel), then
// summed over those dims, then added once.
template <class D, class G, std::size_t R>
void accumulate_repeated(D d, G const& g, std::array<std::int64_t, R> const& to) {
  D s = zeros<typename D::value_type, typename D::device_type>(Shape<dynamic_extents<static_cast<int>(R)>()>{to});
  s = s + g;
  for (std::size_t a = 0; a < R; ++a) {
    if (d.strides()[a] != 0 || to[a] == 1) continue;
    s = D(eval(sum(s, static_cast<std::int64_t>(a), keepdim)));
    d = narrow(d, static_cast<std::int64_t>(a), 0, 1);
  }
  d = d + s;
}

template <class... A>
class Context {
 public:
  explicit Context(A const&... args) : grads_(ArgGrad<A>(args)...) {}

  // Every gradient expression stays alive until the backward ends: the shared nodes it holds
  // keep their addresses, by which their stored results are found (backend/eval.hpp).
  template <class G>
  void keep(G const& g) {
    kept_.push_back(std::make_shared<G const>(g));
  }

  // The gradient g that reaches the tensor t (a leaf): into the argument t is, or views.
  template <class TT, class G>
  void leaf(TT const& t, G const& g) {
    bool taken = false;
    auto one = [&](auto& a) {
      using AG = std::remove_cvref_t<decltype(a)>;
      if constexpr (std::is_same_v<typename AG::T, typename TT::value_type> &&
                    std::is_same_v<typename AG::Device, typename TT::device_type>)
        if (!taken && a.holds(t)) accumulate(a.view_of(t), g), taken = true;
    };
    std::apply([&](auto&... a) { (one(a), ...); }, grads_);
  }

  // dst += g, g of dst's shape or broadcast to it, or of a larger one that dst was broadcast
  // to: then summed over the dims that dst repeats (stride 0), first. A view that repeats an
  // element (an expanded tensor) is summed the same way.
  template <class Dst, class G>
  void accumulate(Dst dst, G const& g) {
    using GN = node_t<G>;
    constexpr int R = Dst::rank > GN::rank ? Dst::rank : GN::rank;
    Index<R> to{};
    to.fill(1);
    check(broadcast_into<R>(to, dst.shape()) && broadcast_into<R>(to, g.shape()),
          "backward: a gradient of shape ", shape_string<GN::rank>(g.shape()), " for a tensor of shape ",
          shape_string<Dst::rank>(dst.shape()));
    auto d = expand(dst, to);
    bool repeats = false;
    for (int a = 0; a < R; ++a) repeats = repeats || (d.strides()[a] == 0 && to[a] > 1);
    if (!repeats) {
      d = d + g;
      return;
    }
    if constexpr (R > 0) accumulate_repeated(d, g, to);
  }

  auto gradients() const {
    return std::apply([](auto const&... a) { return std::make_tuple(a.grad...); }, grads_);
  }

 private:
  std::tuple<ArgGrad<A>...> grads_;
  std::vector<std::shared_ptr<void const>> kept_;
};

// Set while sd::value_and_grad calls the function it derives. A module's forward that
// materializes a block then refuses (nn/block.hpp): the derivation cannot see past a stored
// result, and the gradients before it would be lost.
inline int& deriving() {
  thread_local int depth = 0;
  return depth;
}
struct Deriving {
  Deriving() { ++deriving(); }
  ~Deriving() { --deriving(); }
  Deriving(Deriving const&) = delete;
  Deriving& operator=(Deriving const&) = delete;
};

template <class F, class... A>
auto value_and_grad(F const& f, A const&... args) {
  static_assert(sizeof...(A) >= 1, "solder: value_and_grad: give the tensors to differentiate with respect to");
  static_assert((TensorType<A> && ...), "solder: value_and_grad: the arguments are tensors, each gets a gradient");
  static_assert((is_floating_v<typename A::value_type> && ...),
                "solder: value_and_grad: gradients are of floating-point tensors");
  auto const all = std::forward_as_tuple(args...);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    auto apart = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
      ((check(J >= I || !may_intersect(std::get<J>(all), std::get<I>(all)), "value_and_grad: arguments ", J, " and ",
              I, " share memory: each element gets one gradient")),
       ...);
    };
    (apart(std::integral_constant<std::size_t, I>{}), ...);
  }(std::index_sequence_for<A...>{});

  MaterializedScope scope;  // what the forward stores, the backward reads
  auto const written = [&] {
    Deriving on;
    return f(args...);
  }();
  using E = std::remove_cvref_t<decltype(written)>;
  static_assert(!TensorType<E>,
                "solder: value_and_grad: f returns a tensor; return the expression instead (sd::eval inside f "
                "cuts the derivation, as .detach() would)");
  auto const e = saving_products(as_node(written));
  using N = node_t<E>;
  static_assert(N::rank == 0,
                "solder: value_and_grad: f returns one number (a 0-d expression such as a mean: the loss), "
                "as backward() without an argument in PyTorch");
  static_assert(is_floating_v<typename N::value_type>, "solder: value_and_grad: the loss is floating point");
  using T = canonical_t<typename N::value_type>;
  auto value = eval(e);
  Context<A...> ctx(args...);
  backward(as_node(e), ones<T, typename N::device_type>(Shape<dynamic_extents<0>()>{}), ctx);
  return std::pair{value, ctx.gradients()};
}

}  // namespace detail::autograd

// The function x, w, ... -> (f(x, w, ...), (df/dx, df/dw, ...)) for f returning a 0-d
// expression; the gradients are tensors of the arguments' shapes and strides.
template <class F>
auto value_and_grad(F f) {
  return [f](auto const&... args) { return detail::autograd::value_and_grad(f, args...); };
}
// The function x, w, ... -> (df/dx, df/dw, ...).
template <class F>
auto grad(F f) {
  return [f](auto const&... args) { return detail::autograd::value_and_grad(f, args...).second; };
}

}  // namespace solder
