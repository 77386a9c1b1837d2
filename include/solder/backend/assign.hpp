// Storing an expression into a tensor: the checks every backend shares, the aliasing rule, and
// the hand-off to the executor of the tensor's device (host: OpenMP; cuda: kernels).
#pragma once
#include <ostream>
#include <string>
#include <string_view>

#include "../plan/common_reductions.hpp"
#include "cost.hpp"
#include "eval.hpp"
#include "host/contract.hpp"
#include "host/conv.hpp"
#include "host/attention.hpp"
#include "host/embedding.hpp"
#if defined(__CUDACC__)
#include "cuda/runtime.hpp"
#endif

namespace solder::detail {

namespace cuda {
template <class OutTensor, class N>
void run_kernel(OutTensor& out, N const& root);  // backend/cuda/executor.hpp (nvcc only)
template <class OutTensor, class N>
void run_contraction(OutTensor& out, N const& root);  // backend/cuda/contract.hpp (nvcc only)
}  // namespace cuda

// Opens the scope of Materialized (eval.hpp) for the outermost kernel of an assignment.
class MaterializedScope {
  Materialized own_;
  bool outermost_ = Materialized::current() == nullptr;

 public:
  MaterializedScope() {
    if (outermost_) Materialized::current() = &own_;
  }
  ~MaterializedScope() {
    if (outermost_) Materialized::current() = nullptr;
  }
  bool outermost() const { return outermost_; }
  MaterializedScope(MaterializedScope const&) = delete;
  MaterializedScope& operator=(MaterializedScope const&) = delete;
};

// Planned kernels this thread has run (each of them one loop on the host, one kernel or a
// kernel and its merge on the GPU): what tests compare with kernel_count and explain().
inline std::uint64_t& kernels_run() {
  thread_local std::uint64_t n = 0;
  return n;
}

// Times the kernels and blocks of a call traced on this thread (runtime/trace.hpp: SOLDER_TRACE,
// sd::trace); null otherwise, so that an untraced kernel costs one thread-local load.
class Tracer {
 public:
  virtual void start() = 0;  // a kernel or a block begins; spans nest
  // kind: "contraction", "reduction" or "element-wise"; root: the kernel's root op (its node's
  // name: what explain's text starts with, without the cost of naming every node).
  virtual void stop_kernel(std::string_view kind, std::string root, std::string shape, std::string_view dtype) = 0;
  virtual void stop_block(std::string shape, std::string_view dtype) = 0;  // its result's
  virtual void kernel_cost(KernelCost const&) {}  // the kernel's kind and cost, just before its stop_kernel

 protected:
  ~Tracer() = default;
};
inline Tracer*& tracer() {
  thread_local Tracer* t = nullptr;
  return t;
}

// A traced kernel on the GPU is timed between two waits for solder's stream; none while the
// stream is captured into a CUDA graph (a wait would end the capture): the host's time then.
template <class Device>
void wait_for_traced_kernel() {
#if defined(__CUDACC__)
  if constexpr (!std::is_same_v<Device, Host>) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    SOLDER_CUDA_CHECK(cudaStreamIsCapturing(solder::cuda::stream(), &capture));
    if (capture == cudaStreamCaptureStatusNone) solder::cuda::synchronize();
  }
#endif
}

template <class OutTensor, class N>
void run_kernel(OutTensor& out, N const& root) {
  if constexpr (rewrites_attention<N>())
    if (attention_applies(root)) return run_kernel(out, rewrite_attention(root));
  ++kernels_run();
  Tracer* const traced = tracer();
  if (traced) [[unlikely]] {
    wait_for_traced_kernel<typename OutTensor::device_type>();
    traced->start();
  }
  MaterializedScope scope;
  if constexpr (std::is_same_v<typename OutTensor::device_type, Host>) {
    // Not in nvcc's device passes: host code never runs there, and the host executor would
    // have them build a device copy of every evaluator it uses (__host__ __device__), as much
    // as a third of the device build of a .cu file that also computes on the host.
#if !defined(__CUDA_ARCH__)
    if constexpr (has_anchor<N>()) host::run_contraction(out, root);
    else host::run_kernel(out, root);
#endif
  } else {
    if constexpr (has_anchor<N>()) cuda::run_contraction(out, root);
    else cuda::run_kernel(out, root);
  }
#if !defined(__CUDA_ARCH__)  // (host code, as above)
  if (traced) [[unlikely]] {
    wait_for_traced_kernel<typename OutTensor::device_type>();
    constexpr std::string_view kind = has_anchor<N>() ? "contraction"
                                      : N::kind == NodeKind::reduce || has_fused_reduce<N, N::rank, false>()
                                          ? "reduction"
                                          : "element-wise";
    traced->kernel_cost(detail::kernel_cost(root));
    traced->stop_kernel(kind, root.name(), shape_string<N::rank>(root.shape()),
                        dtype_label<typename OutTensor::value_type>());
  }
#endif
}

// Runs planned kernel I into its part of the block at `offset`, and keeps its result for the
// kernels after it (Materialized).
template <class List, std::size_t I, class N, class Block>
void store_planned(N const& root, Block const& block, std::size_t& offset) {
  using K = typename type_at<I, List>::type;
  if constexpr (stored_ahead<K>) {
    auto store = [&](auto const& node) {
      using Node = std::remove_cvref_t<decltype(node)>;
      using Result = materialized_t<Node>;
      using T = typename Result::value_type;
      Materialized& scope = *Materialized::current();
      if (scope.find(node)) return;  // a copy of an anchor met before (the same id)
      auto* const first = reinterpret_cast<T*>(block.get() + offset);
      offset += workspace_bytes(node);
      Result r = Result::template make_view<Node::rank>(std::shared_ptr<T>(block, first), first, node.shape(),
                                                        contiguous_strides<Node::rank>(node.shape()));
      run_kernel(r, node);
      scope.add(node, r);
    };
    at_path(root, typename K::path{}, store);
  }
}

// Runs the plan of an assignment of root into out (plan.hpp: kernel_list). Every kernel but the
// last stores its result into one block, allocated once with the size the shapes give; the last
// kernel, root's, reads them (make_eval finds them in Materialized) and writes out. Kernels the
// plan does not hold (a run-time break's) materialize on their own as they are met.
template <class OutTensor, class N, std::size_t... I>
void run_plan(OutTensor& out, N const& root, std::index_sequence<I...> ahead) {
  MaterializedScope scope;
  if (scope.outermost()) {
    std::size_t const bytes = plan_workspace(root, ahead);
    auto const block = allocate<std::byte, typename OutTensor::device_type>(static_cast<std::int64_t>(bytes));
    std::size_t offset = 0;
    (store_planned<kernel_list<N>, I>(root, block, offset), ...);
  }
  run_kernel(out, root);
}
template <class OutTensor, class N>
void run_plan(OutTensor& out, N const& root) {
  constexpr std::size_t kernels = kernel_list<N>::size;
  if constexpr (kernels == 1) run_kernel(out, root);
  else run_plan(out, root, std::make_index_sequence<kernels - 1>{});
}

template <class A, class B>
bool same_storage(std::shared_ptr<A> const& a, std::shared_ptr<B> const& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

// The element offsets from t.data() of the lowest and the highest element t reaches.
template <class TT>
std::array<std::int64_t, 2> element_reach(TT const& t) {
  std::int64_t lo = 0, hi = 0;
  for (int i = 0; i < TT::rank; ++i) {
    std::int64_t const reach = (t.shape()[i] - 1) * t.strides()[i];
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo, hi};
}
// The bytes [first, last) that t's elements lie in (t not empty).
template <class TT>
std::array<char const*, 2> byte_span(TT const& t) {
  constexpr auto size = static_cast<std::int64_t>(sizeof(typename TT::value_type));
  auto const* first = reinterpret_cast<char const*>(t.data());
  auto const [lo, hi] = element_reach(t);
  return {first + lo * size, first + (hi + 1) * size};
}

// Would writing `out` while this kernel reads its inputs clobber a value before it is read?
// Safe only when an aliasing input is exactly the output's view (each element is read
// before the same element is written, and lines are prepared before they are written).
template <int D, bool InReduce, class N, class OutTensor>
bool overlaps(N const& n, OutTensor const& out) {
  if constexpr (is_break<N, D, InReduce>() || N::kind == NodeKind::view ||
                N::kind == NodeKind::shared || N::kind == NodeKind::scalar) {
    return false;  // breaks, views' and shared nodes' children: evaluated into temporaries first
  } else if constexpr (N::kind == NodeKind::leaf) {
    auto const& t = n.tensor;
    if (!same_storage(t.storage(), out.storage()) || t.numel() == 0 || out.numel() == 0) return false;
    if constexpr (N::rank == OutTensor::rank)
      if (static_cast<void const*>(t.data()) == static_cast<void const*>(out.data()) &&
          same_index<N::rank>(t.shape(), out.shape()) &&
          same_index<N::rank>(t.strides(), out.strides()))
        return false;
    return true;
  } else if constexpr (N::kind == NodeKind::map) {
    return any_child(n, [&](auto const& c) -> bool { return overlaps<D, InReduce>(c, out); });
  } else if constexpr (N::kind == NodeKind::reduce) {
    return overlaps<decltype(n.input)::rank, true>(n.input, out);
  } else {
    unhandled_kind<N>("the alias check");
    return false;
  }
}

// A contraction's operands are read while the whole output is written: an operand in the
// output's memory, even its very view, would be overwritten before it is read. (Operands that
// are other expressions than element-wise ones, fused as a prologue, are materialized first.)
template <class C, class OutTensor>
bool operand_overlaps(C const& c, OutTensor const& out) {
  if constexpr (C::kind == NodeKind::leaf)
    return same_storage(c.tensor.storage(), out.storage()) && c.tensor.numel() > 0 && out.numel() > 0;
  else if constexpr (C::kind == NodeKind::map)
    return any_child(c, [&](auto const& x) -> bool { return operand_overlaps(x, out); });
  else return false;
}
template <class N, class OutTensor>
bool anchor_overlaps(N const& n, OutTensor const& out) {
  bool hit = false;
  if constexpr (has_anchor<N>())
    with_anchor<N::rank>(n, [&](auto const& a) {
      hit = any_child(a, [&](auto const& c) -> bool { return operand_overlaps(c, out); });
    });
  return hit;
}

// A tensor some of whose elements share memory (an expanded view: stride 0 along an axis of
// more than one element) cannot be written: each write would land on several elements, the
// last one winning. PyTorch refuses it too.
template <class Dst>
void check_no_internal_overlap(Dst const& dst, char const* op) {
  constexpr int R = Dst::rank;
  bool repeats = false;
  for (int i = 0; i < R; ++i) repeats = repeats || (dst.strides()[i] == 0 && dst.shape()[i] > 1);
  check(!repeats || dst.numel() == 0, op, ": cannot write to a tensor of shape ",
        shape_string<R>(dst.shape()), " and strides ", shape_string<R>(dst.strides()),
        ": more than one element refers to the same memory location (an expanded view); "
        "write to a clone() of it instead");
}

template <class To, class From>
constexpr bool can_store = category<From> <= category<To>;

template <class Dst, class N>
void assign_node(Dst& dst, N const& node);

// A view that only regroups its child's elements in their order (squeeze, unsqueeze, flatten,
// reshape, view) into a contiguous tensor: the child is written into the tensor seen with the
// child's shape, by the child's kernels, with no copy after them. False: not such a case.
template <class Dst, class N>
bool store_through_view(Dst& dst, N const& n) {
  if constexpr (keeps_order<N>()) {
    if (!dst.is_contiguous()) return false;
    auto as_child = view(dst, n.input.shape());
    assign_node(as_child, n.input);
    return true;
  } else {
    return false;
  }
}

template <class Dst, class N>
void assign_node(Dst& dst, N const& node) {
  using Device = typename Dst::device_type;
  constexpr int R = Dst::rank;
  constexpr bool same_rank = N::rank == R;
  constexpr bool same_extents = [] {
    if constexpr (same_rank) return assignable(Dst::static_extents, N::static_extents);
    else return false;
  }();
  constexpr bool storable = can_store<typename Dst::value_type, typename N::value_type>;
  constexpr bool same_device =
      std::is_void_v<typename N::device_type> || std::is_same_v<typename N::device_type, Device>;
  static_assert(same_rank, "solder: assignment: the expression's rank differs from the tensor's");
  static_assert(!same_rank || same_extents,
                "solder: assignment: static extents of the expression and the tensor differ");
  static_assert(storable,
                "solder: assignment: cannot store this expression's element type in the tensor "
                "without a narrowing cast (use sd::cast<T>)");
  static_assert(same_device,
                "solder: assignment: the expression's tensors live on another device than the "
                "tensor it is stored into (move them with .to<>())");
  // Misuse stops here: nvcc's front end would otherwise go on into the executor and print a
  // page of errors after the one above.
  if constexpr (same_extents && storable && same_device) {
    check(same_index<R>(node.shape(), dst.shape()), "assign: expression of shape ", shape_string<R>(node.shape()),
          " into a tensor of shape ", shape_string<R>(dst.shape()));
    check_no_internal_overlap(dst, "assign");
    if (store_through_view(dst, node)) return;
    with_common_reductions(node, [&](N const& n) {
      if (overlaps<R, false>(n, dst) || anchor_overlaps(n, dst)) {
        using T = canonical_t<typename N::value_type>;
        BasicTensor<T, dynamic_extents<R>(), Device> tmp(n.shape());
        run_plan(tmp, n);
        run_kernel(dst, Leaf<T, dynamic_extents<R>(), Device>(tmp));
        return;
      }
      run_plan(dst, n);
    });
  }
}

template <class Dst, class Src>
void assign(Dst& dst, Src const& src) {
  assign_node(dst, stored(as_node(src)));  // (a shared root: its child, with no copy)
}

template <class N>
materialized_t<N> materialize(N const& n) {
  if constexpr (keeps_order<N>()) {
    return n.apply(materialize_once(n.input));  // the child's result regrouped, as the plan has it
  } else {
    materialized_t<N> t(n.shape());
    run_kernel(t, n);
    return t;
  }
}

}  // namespace solder::detail

namespace solder {

// An expression is a tensor source (core/tensor.hpp): `Tensor t = e;` and `t = e;` run its
// planned kernels.
template <Expr S>
struct TensorSource<S> {
  static constexpr bool value = true;
  template <class Dst>
  static void write(Dst& dst, S const& s) {
    detail::assign(dst, s);
  }
};

// Evaluates an expression into a new tensor (what `Tensor<T, R> t = e;` does).
template <Lazy X>
auto eval(X const& x) {
  using N = node_t<X>;
  return BasicTensor<detail::canonical_t<typename N::value_type>, N::static_extents,
                     typename N::device_type>(as_node(x));
}

template <class T, auto E, class Device>
BasicTensor<T, E, Device> BasicTensor<T, E, Device>::clone() const {
  BasicTensor<T, E, Device> c(shape_);
  detail::run_kernel(c, Leaf<T, E, Device>(*this));
  return c;
}

// An expression prints as the tensor it evaluates to.
template <Expr X>
std::ostream& operator<<(std::ostream& os, X const& e) {
  return os << eval(e);
}

}  // namespace solder
