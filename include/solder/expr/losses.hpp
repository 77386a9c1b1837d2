// Loss functions as torch.nn.functional's, written as expressions (so their backward is
// derived and fused as any other, autograd/derivatives.hpp): cross_entropy, nll_loss, mse_loss,
// l1_loss, binary_cross_entropy_with_logits, and one_hot. The reduction is a template argument,
// since it decides the result's rank: mean (the default) and sum give one number, none one per
// sample (sd::cross_entropy<sd::Reduction::none>(logits, labels)).
#pragma once
#include <cstdint>

#include "../core/factories.hpp"
#include "rows.hpp"

namespace solder {

enum class Reduction { mean, sum, none };

struct CrossEntropyOptions {
  std::int64_t ignore_index = -100;  // samples with this label count for nothing, not even in the mean
  double label_smoothing = 0;        // the target mixes in the uniform distribution by this much
};

namespace detail {
// Class indices 0 .. n-1 on the labels' device.
template <class Device>
auto class_indices(std::int64_t n) {
  auto classes = arange<std::int64_t>(0, static_cast<double>(n));
  if constexpr (std::is_same_v<Device, Host>) return classes;
  else return classes.template to<Device>();
}

// A host tensor of labels is checked as PyTorch checks it: every label a class or ignore_index.
template <class L>
void check_labels(L const& labels, std::int64_t classes, std::int64_t ignore_index, char const* op) {
  if constexpr (TensorType<L> && std::is_same_v<typename L::device_type, Host>) {
    auto const c = eval(cast<std::int64_t>(labels));
    for (std::int64_t i = 0; i < c.numel(); ++i) {
      std::int64_t const y = c.data()[i];
      check(y == ignore_index || (y >= 0 && y < classes), op, ": target ", y, " is out of bounds for ", classes,
            " classes");
    }
  }
}

// Where each label is, over the classes: [..., classes] of bool.
template <class L>
auto labels_one_hot(L const& labels, std::int64_t classes) {
  return unsqueeze(labels, -1) == class_indices<typename node_t<L>::device_type>(classes);
}

template <Reduction R, class PerSample, class Weight>
auto reduce_loss(PerSample const& per_sample, Weight const& weight) {
  if constexpr (R == Reduction::none) return per_sample;
  else if constexpr (R == Reduction::sum) return sum(per_sample);
  else return sum(per_sample) / sum(weight);
}
template <Reduction R, class E>
auto reduce_loss(E const& e) {
  if constexpr (R == Reduction::none) return e;
  else if constexpr (R == Reduction::sum) return sum(e);
  else return mean(e);
}
}  // namespace detail

// F.one_hot(labels, num_classes): [..., num_classes] of int64, 1 at each label; an element-wise
// comparison, fused into what reads it.
template <Lazy L>
auto one_hot(L const& labels, std::int64_t num_classes) {
  using N = node_t<L>;
  static_assert(std::is_integral_v<typename N::value_type> && !std::is_same_v<typename N::value_type, bool>,
                "solder: one_hot: the labels are integers");
  detail::check(num_classes > 0, "one_hot: num_classes must be positive, got ", num_classes);
  detail::check_labels(labels, num_classes, -1, "one_hot");
  return cast<std::int64_t>(detail::labels_one_hot(labels, num_classes));
}

// F.cross_entropy(logits [N, C], labels [N]): -log_softmax(logits)[label], with ignore_index and
// label_smoothing as PyTorch's; the mean is over the samples not ignored.
template <Reduction R = Reduction::mean, Lazy Z, Lazy L>
auto cross_entropy(Z const& logits, L const& labels, CrossEntropyOptions const& o = {}) {
  using T = typename node_t<Z>::value_type;
  static_assert(node_t<Z>::rank == 2 && node_t<L>::rank == 1,
                "solder: cross_entropy: logits [N, C] and integer labels [N]");
  static_assert(is_floating_v<T>, "solder: cross_entropy: the logits are floating point");
  std::int64_t const classes = logits.shape()[1];
  detail::check(labels.shape()[0] == logits.shape()[0], "cross_entropy: logits of shape ",
                shape_string<2>(logits.shape()), " and labels of shape ", shape_string<1>(labels.shape()));
  detail::check(o.label_smoothing >= 0 && o.label_smoothing <= 1, "cross_entropy: label_smoothing ",
                o.label_smoothing, " is not in [0, 1]");
  detail::check_labels(labels, classes, o.ignore_index, "cross_entropy");
  T const eps = static_cast<T>(o.label_smoothing);
  auto const target = cast<T>(detail::labels_one_hot(labels, classes)) * (T(1) - eps) + eps / static_cast<T>(classes);
  auto const kept = cast<T>(labels != o.ignore_index);
  return detail::reduce_loss<R>(-sum(log_softmax(logits, -1) * target, 1) * kept, kept);
}

// F.nll_loss(log_probs [N, C], labels [N]): -log_probs[label], with ignore_index.
template <Reduction R = Reduction::mean, Lazy P, Lazy L>
auto nll_loss(P const& log_probs, L const& labels, std::int64_t ignore_index = -100) {
  using T = typename node_t<P>::value_type;
  static_assert(node_t<P>::rank == 2 && node_t<L>::rank == 1, "solder: nll_loss: log_probs [N, C] and labels [N]");
  std::int64_t const classes = log_probs.shape()[1];
  detail::check(labels.shape()[0] == log_probs.shape()[0], "nll_loss: log_probs of shape ",
                shape_string<2>(log_probs.shape()), " and labels of shape ", shape_string<1>(labels.shape()));
  detail::check_labels(labels, classes, ignore_index, "nll_loss");
  auto const kept = cast<T>(labels != ignore_index);
  return detail::reduce_loss<R>(-sum(log_probs * cast<T>(detail::labels_one_hot(labels, classes)), 1) * kept, kept);
}

// F.mse_loss, F.l1_loss: of two expressions of one shape (or that broadcast).
template <Reduction R = Reduction::mean, Lazy A, Lazy B>
auto mse_loss(A const& input, B const& target) {
  auto d = input - target;
  return detail::reduce_loss<R>(d * d);
}
template <Reduction R = Reduction::mean, Lazy A, Lazy B>
auto l1_loss(A const& input, B const& target) {
  return detail::reduce_loss<R>(abs(input - target));
}

// F.binary_cross_entropy_with_logits(z, t): max(z, 0) - z t + log(1 + exp(-|z|)), stable for
// any z.
template <Reduction R = Reduction::mean, Lazy Z, Lazy Tg>
auto binary_cross_entropy_with_logits(Z const& logits, Tg const& target) {
  return detail::reduce_loss<R>(relu(logits) - logits * target + log1p(exp(-abs(logits))));
}

}  // namespace solder
