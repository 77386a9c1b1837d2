// Optimizers as torch.optim's: SGD (momentum, dampening, Nesterov, weight decay), Adam (L2
// weight decay) and AdamW (decoupled weight decay), with PyTorch's defaults and update rules.
// An optimizer holds its parameters (tensors that share the caller's memory) and its state;
// step(grads) takes their gradients, in the order of the parameters (the tuple sd::grad
// returns), and updates every parameter in place with one kernel each: the parameter and its
// state are the several results of one pass over them and the gradient (backend/results.hpp).
//
//   sd::optim::AdamW opt(std::tie(w, b), {.lr = 1e-3, .weight_decay = 1e-2});
//   for (...) {
//     auto [loss, grads] = sd::value_and_grad(f)(w, b);
//     opt.step(grads);
//   }
#pragma once
#include <algorithm>
#include <cmath>
#include <numbers>
#include <tuple>
#include <vector>

#include "../backend/results.hpp"

namespace solder::optim {

namespace detail {
// The parameters as rank-1 views of their memory (contiguous), one element type and device.
template <class T, class Device>
using Flat = BasicTensor<T, dynamic_extents<1>(), Device>;

template <class TT>
auto flat(TT const& t, char const* who) {
  solder::detail::check(t.is_contiguous(), who, ": a parameter or gradient of shape ", shape_string<TT::rank>(t.shape()),
                        " is not contiguous (optimizers update contiguous tensors)");
  return Flat<typename TT::value_type, typename TT::device_type>::template make_view<1>(
      t.storage(), const_cast<typename TT::value_type*>(t.data()), {t.numel()}, {1});
}

template <class... P>
struct first_of {
  using type = std::tuple_element_t<0, std::tuple<std::remove_cvref_t<P>...>>;
};

// The parameters' flat views, checked to share one element type and device.
template <class T, class Device, class... P>
std::vector<Flat<T, Device>> flat_all(std::tuple<P&...> const& params, char const* who) {
  static_assert(sizeof...(P) >= 1, "solder: optim: give the parameters to optimize");
  static_assert((std::is_same_v<typename std::remove_cvref_t<P>::value_type, T> && ...) &&
                    (std::is_same_v<typename std::remove_cvref_t<P>::device_type, Device> && ...),
                "solder: optim: the parameters must share one element type and device");
  static_assert(is_floating_v<T>, "solder: optim: parameters are floating point");
  std::vector<Flat<T, Device>> out;
  std::apply([&](auto&... p) { (out.push_back(flat(p, who)), ...); }, params);
  return out;
}

template <class T, class Device>
std::vector<Flat<T, Device>> zeros_like(std::vector<Flat<T, Device>> const& ps) {
  std::vector<Flat<T, Device>> out;
  for (auto const& p : ps) out.push_back(zeros<T, Device>(shape(p.numel())));
  return out;
}

// The gradients, in the parameters' order, as flat views checked against their parameters.
template <class T, class Device, class G>
std::vector<Flat<T, Device>> gradients(G const& grads, std::vector<Flat<T, Device>> const& params, char const* who) {
  std::vector<Flat<T, Device>> out;
  std::apply([&](auto const&... g) { (out.push_back(flat(g, who)), ...); }, grads);
  solder::detail::check(out.size() == params.size(), who, ": step got ", out.size(), " gradients for ",
                        params.size(), " parameters");
  for (std::size_t i = 0; i < out.size(); ++i)
    solder::detail::check(out[i].numel() == params[i].numel(), who, ": the gradient of parameter ", i, " has ",
                          out[i].numel(), " elements, the parameter ", params[i].numel());
  return out;
}
}  // namespace detail

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// torch.optim.SGD: g += weight_decay * p; with momentum, buf = momentum * buf + (1 - dampening)
// * g (buf = g at the first step) and g = nesterov ? g + momentum * buf : buf; p -= lr * g.
template <class T = float, class Device = Host>
class SGD {
 public:
  template <class... P>
  SGD(std::tuple<P&...> params, SGDOptions const& o)
      : options_(o), params_(detail::flat_all<T, Device>(params, "optim::SGD")), buf_(detail::zeros_like(params_)) {
    solder::detail::check(o.lr >= 0 && o.momentum >= 0 && o.weight_decay >= 0, "optim::SGD: lr ", o.lr,
                          ", momentum ", o.momentum, ", weight_decay ", o.weight_decay, ": none may be negative");
    solder::detail::check(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
                          "optim::SGD: Nesterov momentum requires a momentum and zero dampening");
  }

  template <class G>
  void step(G const& grads) {
    auto const gs = detail::gradients(grads, params_, "optim::SGD");
    T const lr = T(options_.lr), mu = T(options_.momentum), wd = T(options_.weight_decay),
            damp = T(1 - options_.dampening);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      auto& p = params_[i];
      auto& buf = buf_[i];
      auto const g = gs[i] + wd * p;
      if (options_.momentum == 0) {
        p = p - lr * g;
      } else {
        T const scale = steps_ == 0 ? T(1) : damp;  // the first step: buf = g (buf is 0 then)
        auto const b = mu * buf + scale * g;
        if (options_.nesterov) assign(std::tie(p, buf), p - lr * (g + mu * b), b);
        else assign(std::tie(p, buf), p - lr * b, b);
      }
    }
    ++steps_;
  }
  SGDOptions const& options() const { return options_; }
  double lr() const { return options_.lr; }
  void set_lr(double lr) { options_.lr = lr; }

 private:
  SGDOptions options_;
  std::vector<detail::Flat<T, Device>> params_, buf_;
  std::int64_t steps_ = 0;
};

// PyTorch's defaults; Adam adds weight_decay * p to the gradient (L2), AdamW decays p itself.
// amsgrad: the denominator uses the largest v seen so far.
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
};
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
};

namespace detail {
// Adam's and AdamW's step: m and v the moving averages of g and g^2, their bias corrections at
// step t, and the update of p; `decoupled`: AdamW's decay of p by lr * weight_decay, else
// Adam's L2 term in g.
template <class T, class Device>
class AdamBase {
 protected:
  template <class... P>
  AdamBase(std::tuple<P&...> params, AdamOptions const& o, bool decoupled, char const* who)
      : options_(o),
        decoupled_(decoupled),
        who_(who),
        params_(flat_all<T, Device>(params, who)),
        m_(zeros_like(params_)),
        v_(zeros_like(params_)),
        v_max_(o.amsgrad ? zeros_like(params_) : std::vector<Flat<T, Device>>{}) {
    solder::detail::check(o.lr >= 0 && o.eps >= 0 && o.weight_decay >= 0 && o.beta1 >= 0 && o.beta1 < 1 &&
                              o.beta2 >= 0 && o.beta2 < 1,
                          who, ": lr ", o.lr, ", betas (", o.beta1, ", ", o.beta2, "), eps ", o.eps,
                          ", weight_decay ", o.weight_decay, ": out of range");
  }

 public:
  template <class G>
  void step(G const& grads) {
    auto const gs = gradients(grads, params_, who_);
    ++steps_;
    double const c1 = 1 - std::pow(options_.beta1, double(steps_)), c2 = 1 - std::pow(options_.beta2, double(steps_));
    T const b1 = T(options_.beta1), b2 = T(options_.beta2), eps = T(options_.eps);
    T const step_size = T(options_.lr / c1), root_c2 = T(std::sqrt(c2));
    T const keep = T(decoupled_ ? 1 - options_.lr * options_.weight_decay : 1);
    T const l2 = T(decoupled_ ? 0 : options_.weight_decay);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      auto& p = params_[i];
      auto const g = gs[i] + l2 * p;
      auto const m = b1 * m_[i] + (1 - b1) * g;
      auto const v = b2 * v_[i] + (1 - b2) * g * g;
      if (options_.amsgrad) {
        auto const v_max = maximum(v_max_[i], v);
        assign(std::tie(p, m_[i], v_[i], v_max_[i]), keep * p - step_size * m / (sqrt(v_max) / root_c2 + eps), m, v,
               v_max);
      } else {
        assign(std::tie(p, m_[i], v_[i]), keep * p - step_size * m / (sqrt(v) / root_c2 + eps), m, v);
      }
    }
  }
  AdamOptions const& options() const { return options_; }
  double lr() const { return options_.lr; }
  void set_lr(double lr) { options_.lr = lr; }
  std::int64_t steps() const { return steps_; }

 private:
  AdamOptions options_;
  bool decoupled_;
  char const* who_;
  std::vector<Flat<T, Device>> params_, m_, v_, v_max_;
  std::int64_t steps_ = 0;
};
}  // namespace detail

// torch.optim.Adam: weight decay as an L2 term of the gradient.
template <class T = float, class Device = Host>
class Adam : public detail::AdamBase<T, Device> {
 public:
  template <class... P>
  Adam(std::tuple<P&...> params, AdamOptions const& o = {})
      : detail::AdamBase<T, Device>(params, o, false, "optim::Adam") {}
};

// torch.optim.AdamW: weight decay decoupled from the gradient (p *= 1 - lr * weight_decay).
template <class T = float, class Device = Host>
class AdamW : public detail::AdamBase<T, Device> {
 public:
  template <class... P>
  AdamW(std::tuple<P&...> params, AdamWOptions const& o = {})
      : detail::AdamBase<T, Device>(params, {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad}, true,
                                    "optim::AdamW") {}
};

// The element type and device come from the parameters: sd::optim::AdamW opt(std::tie(w, b)).
template <class... P>
SGD(std::tuple<P&...>, SGDOptions const&)
    -> SGD<typename detail::first_of<P...>::type::value_type, typename detail::first_of<P...>::type::device_type>;
template <class... P>
Adam(std::tuple<P&...>, AdamOptions const& = {})
    -> Adam<typename detail::first_of<P...>::type::value_type, typename detail::first_of<P...>::type::device_type>;
template <class... P>
AdamW(std::tuple<P&...>, AdamWOptions const& = {})
    -> AdamW<typename detail::first_of<P...>::type::value_type, typename detail::first_of<P...>::type::device_type>;

// Learning-rate schedules as torch.optim.lr_scheduler's: each step() after an epoch (or an
// iteration) sets the optimizer's rate from the rate it had when the schedule was made.
template <class Opt>
class Schedule {
 public:
  explicit Schedule(Opt& opt) : opt_(opt), base_(opt.lr()) {}
  void step() { opt_.set_lr(rate(++epoch_)); }
  double get_last_lr() const { return opt_.lr(); }

 protected:
  virtual double rate(std::int64_t epoch) const = 0;
  ~Schedule() = default;
  Opt& opt_;
  double base_;
  std::int64_t epoch_ = 0;
};

// StepLR: the rate times gamma every step_size epochs.
template <class Opt>
class StepLR : public Schedule<Opt> {
 public:
  StepLR(Opt& opt, std::int64_t step_size, double gamma = 0.1) : Schedule<Opt>(opt), step_size_(step_size), gamma_(gamma) {
    solder::detail::check(step_size > 0, "optim::StepLR: step_size must be positive, got ", step_size);
  }

 private:
  double rate(std::int64_t epoch) const override {
    return this->base_ * std::pow(gamma_, double(epoch / step_size_));
  }
  std::int64_t step_size_;
  double gamma_;
};

// CosineAnnealingLR: from the rate down to eta_min along half a cosine over T_max epochs.
template <class Opt>
class CosineAnnealingLR : public Schedule<Opt> {
 public:
  CosineAnnealingLR(Opt& opt, std::int64_t T_max, double eta_min = 0) : Schedule<Opt>(opt), t_max_(T_max), eta_min_(eta_min) {
    solder::detail::check(T_max > 0, "optim::CosineAnnealingLR: T_max must be positive, got ", T_max);
  }

 private:
  double rate(std::int64_t epoch) const override {
    return eta_min_ + (this->base_ - eta_min_) * (1 + std::cos(std::numbers::pi * double(epoch) / double(t_max_))) / 2;
  }
  std::int64_t t_max_;
  double eta_min_;
};

// LinearLR (warm-up): the rate times a factor going linearly from start_factor to end_factor
// over total_iters epochs, then end_factor.
template <class Opt>
class LinearLR : public Schedule<Opt> {
 public:
  LinearLR(Opt& opt, double start_factor = 1.0 / 3, double end_factor = 1.0, std::int64_t total_iters = 5)
      : Schedule<Opt>(opt), start_(start_factor), end_(end_factor), total_(total_iters) {
    solder::detail::check(start_factor > 0 && start_factor <= 1 && end_factor >= 0 && end_factor <= 1 && total_iters > 0,
                          "optim::LinearLR: start_factor ", start_factor, ", end_factor ", end_factor,
                          ", total_iters ", total_iters, ": out of range");
    opt.set_lr(this->base_ * start_);
  }

 private:
  double rate(std::int64_t epoch) const override {
    double const t = double(std::min(epoch, total_)) / double(total_);
    return this->base_ * (start_ + (end_ - start_) * t);
  }
  double start_, end_;
  std::int64_t total_;
};

}  // namespace solder::optim

namespace solder::nn::utils {

// torch.nn.utils.clip_grad_norm_: scales the gradients (the tuple sd::grad returns) in place so
// that their joint 2-norm is at most max_norm; returns the norm they had.
template <class... G>
double clip_grad_norm_(std::tuple<G...>& grads, double max_norm) {
  double squares = 0;
  std::apply([&](auto const&... g) { ((squares += double(eval(sum(g * g)).item())), ...); }, grads);
  double const norm = std::sqrt(squares);
  double const scale = std::min(1.0, max_norm / (norm + 1e-6));
  if (scale < 1)
    std::apply([&](auto&... g) { ((g = g * static_cast<typename std::remove_cvref_t<decltype(g)>::value_type>(scale)), ...); },
               grads);
  return norm;
}

}  // namespace solder::nn::utils

