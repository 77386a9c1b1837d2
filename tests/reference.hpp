// Double-precision reference machinery for solder's op tests.
//
// Every test computes what an expression should produce with plain <cmath> on doubles,
// independently of solder (no solder op, reduction or view is used to build a reference),
// and compares with solder's result element by element:
//   ref::Array        a row-major N-d array of doubles (the reference's only data type)
//   ref::of(t)        a tensor's logical values (any strides, any dtype) as an Array
//   ref::map / reduce / permute   NumPy-style broadcasting maps, reductions and permutations
//   ref::matmul       torch.matmul's rules, with each output's scale for the error bound
//   ref::check_close  |actual - expected| <= ulps * ulp_T(expected) + abs + scale_eps*eps_T*scale
//   ref::check_equal  exact equality (integers, bools, comparisons)
//   ref::uniform<T>   random tensors from a fixed-seed std::mt19937_64 (not solder's RNG)
//   ref::iota2        a [rows, cols] float tensor holding 0, 1, 2, ... in row-major order
//   ref::kernels_of   the planned kernels that running a function takes on this thread
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <solder/solder.hpp>

namespace ref {

// The planned kernels that running f takes on this thread (sd::detail::kernels_run).
template <class F>
std::uint64_t kernels_of(F const& f) {
  auto const before = solder::detail::kernels_run();
  f();
  return solder::detail::kernels_run() - before;
}

namespace sd = solder;
using Shape = std::vector<std::int64_t>;

inline std::int64_t numel(Shape const& s) {
  std::int64_t n = 1;
  for (auto e : s) n *= e;
  return n;
}

inline Shape strides_of(Shape const& s) {
  Shape st(s.size());
  std::int64_t acc = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

inline std::string str(Shape const& s) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

// Advances a row-major multi-index; false after the last one.
inline bool next_index(Shape& idx, Shape const& shape) {
  for (std::size_t a = shape.size(); a-- > 0;) {
    if (++idx[a] < shape[a]) return true;
    idx[a] = 0;
  }
  return false;
}

struct Array {
  Shape shape;
  std::vector<double> v;

  Array() = default;
  Array(Shape s, double fill = 0) : shape(std::move(s)), v(static_cast<std::size_t>(ref::numel(shape)), fill) {}
  std::int64_t numel() const { return static_cast<std::int64_t>(v.size()); }
  double& operator[](std::int64_t i) { return v[static_cast<std::size_t>(i)]; }
  double operator[](std::int64_t i) const { return v[static_cast<std::size_t>(i)]; }
  double at(Shape const& idx) const {
    std::int64_t off = 0, acc = 1;
    for (std::size_t a = shape.size(); a-- > 0;) {
      off += idx[a] * acc;
      acc *= shape[a];
    }
    return v[static_cast<std::size_t>(off)];
  }
};

// A tensor's values in row-major logical order, read through its own shape and strides.
template <class TT>
Array of(TT const& t) {
  constexpr int R = TT::rank;
  Shape s(t.shape().begin(), t.shape().end());
  Array a(s);
  if (a.numel() == 0) return a;
  Shape idx(static_cast<std::size_t>(R), 0);
  std::int64_t k = 0;
  do {
    std::int64_t off = 0;
    for (int i = 0; i < R; ++i) off += idx[static_cast<std::size_t>(i)] * t.strides()[static_cast<std::size_t>(i)];
    a[k++] = static_cast<double>(t.data()[off]);
  } while (next_index(idx, s));
  return a;
}

// NumPy broadcasting of any number of arrays; f receives one double per array.
template <class F, class... A>
Array map(F const& f, A const&... arrays) {
  std::size_t R = std::max({arrays.shape.size()...});
  Shape out(R, 1);
  auto merge = [&](Array const& x) {
    std::size_t off = R - x.shape.size();
    for (std::size_t i = 0; i < x.shape.size(); ++i) {
      std::int64_t& o = out[off + i];
      std::int64_t e = x.shape[i];
      if (o == 1) o = e;
      else if (e != 1 && e != o) throw std::runtime_error("ref::map: shapes do not broadcast");
    }
  };
  (merge(arrays), ...);
  Array r(out);
  if (r.numel() == 0) return r;
  auto read = [&](Array const& x, Shape const& idx) {
    std::size_t off = R - x.shape.size();
    std::int64_t o = 0, acc = 1;
    for (std::size_t i = x.shape.size(); i-- > 0;) {
      std::int64_t j = x.shape[i] == 1 ? 0 : idx[off + i];
      o += j * acc;
      acc *= x.shape[i];
    }
    return x.v[static_cast<std::size_t>(o)];
  };
  Shape idx(R, 0);
  std::int64_t k = 0;
  do {
    r[k++] = f(read(arrays, idx)...);
  } while (next_index(idx, out));
  return r;
}

// The array with its axes permuted: result axis i is input axis perm[i].
inline Array permute(Array const& a, std::vector<int> const& perm) {
  Shape s(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) s[i] = a.shape[static_cast<std::size_t>(perm[i])];
  Array r(s);
  if (r.numel() == 0) return r;
  Shape idx(perm.size(), 0), src(perm.size(), 0);
  std::int64_t k = 0;
  do {
    for (std::size_t i = 0; i < perm.size(); ++i) src[static_cast<std::size_t>(perm[i])] = idx[i];
    r[k++] = a.at(src);
  } while (next_index(idx, s));
  return r;
}

inline Array transpose(Array const& a, int d0, int d1) {
  std::vector<int> p(a.shape.size());
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[static_cast<std::size_t>(d0)], p[static_cast<std::size_t>(d1)]);
  return permute(a, p);
}

// torch.matmul's rules on arrays: vectors, matrices, batches with broadcast batch dims. Also
// returns the sum of |a||b| of each output's terms (scale): a float dot product of k terms is
// within k * eps of it (check_close's scale_eps).
struct Product {
  Array value, scale;
};
inline Product matmul(Array a, Array b) {
  bool vec_a = a.shape.size() == 1, vec_b = b.shape.size() == 1;
  if (vec_a) a.shape.insert(a.shape.begin(), 1);
  if (vec_b) b.shape.push_back(1);
  std::size_t ra = a.shape.size(), rb = b.shape.size(), R = std::max(ra, rb);
  std::int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], n = b.shape[rb - 1];
  if (b.shape[rb - 2] != k) throw std::runtime_error("ref::matmul: inner dims differ");
  Shape batch(R - 2, 1);
  auto merge = [&](Shape const& s) {
    std::size_t off = R - s.size();
    for (std::size_t i = 0; i + 2 < s.size(); ++i) {
      std::int64_t& o = batch[off + i];
      if (o == 1) o = s[i];
      else if (s[i] != 1 && s[i] != o) throw std::runtime_error("ref::matmul: batch dims do not broadcast");
    }
  };
  merge(a.shape);
  merge(b.shape);
  Shape full = batch;
  full.push_back(m);
  full.push_back(n);
  Product p{Array(full), Array(full)};
  auto at = [&](Array const& x, Shape const& bi, std::int64_t r, std::int64_t c) {
    std::size_t xr = x.shape.size(), off = R - xr;
    Shape idx(xr);
    for (std::size_t i = 0; i + 2 < xr; ++i) idx[i] = x.shape[i] == 1 ? 0 : bi[off + i];
    idx[xr - 2] = r;
    idx[xr - 1] = c;
    return x.at(idx);
  };
  Shape bi(R - 2, 0);
  std::int64_t o = 0;
  do {
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j, ++o) {
        double s = 0, sc = 0;
        for (std::int64_t q = 0; q < k; ++q) {
          double t = at(a, bi, i, q) * at(b, bi, q, j);
          s += t;
          sc += std::fabs(t);
        }
        p.value[o] = s;
        p.scale[o] = sc;
      }
  } while (!batch.empty() && next_index(bi, batch));
  Shape out = batch;  // the vectors' dims dropped, as torch.matmul does
  if (!vec_a) out.push_back(m);
  if (!vec_b) out.push_back(n);
  p.value.shape = p.scale.shape = out;
  return p;
}

inline int wrap(int d, int rank) { return d < 0 ? d + rank : d; }

// Reduces over `dims` (any order, negatives allowed): f receives the values of one output's
// reduction, in row-major order of the reduced axes (so an index into it is the flat index
// PyTorch's argmax reports).
template <class F>
Array reduce(Array const& a, std::vector<int> dims, bool keepdim, F const& f) {
  int R = static_cast<int>(a.shape.size());
  std::vector<bool> red(static_cast<std::size_t>(R), false);
  for (int& d : dims) red[static_cast<std::size_t>(wrap(d, R))] = true;
  Shape out, kept, rshape;
  for (int i = 0; i < R; ++i) {
    auto e = a.shape[static_cast<std::size_t>(i)];
    if (red[static_cast<std::size_t>(i)]) {
      rshape.push_back(e);
      if (keepdim) out.push_back(1);
    } else {
      kept.push_back(e);
      out.push_back(e);
    }
  }
  Array r(out);
  if (r.numel() == 0) return r;
  std::int64_t n = numel(rshape);
  std::vector<double> line(static_cast<std::size_t>(n));
  Shape ko(kept.size(), 0);
  std::int64_t k = 0;
  do {
    Shape ri(rshape.size(), 0), full(static_cast<std::size_t>(R), 0);
    for (std::int64_t j = 0; j < n; ++j) {
      std::size_t kk = 0, rr = 0;
      for (int i = 0; i < R; ++i)
        full[static_cast<std::size_t>(i)] = red[static_cast<std::size_t>(i)] ? ri[rr++] : ko[kk++];
      line[static_cast<std::size_t>(j)] = a.at(full);
      next_index(ri, rshape);
    }
    r[k++] = f(line);
  } while (next_index(ko, kept));
  return r;
}

inline std::vector<int> all_dims(Array const& a) {
  std::vector<int> d(a.shape.size());
  std::iota(d.begin(), d.end(), 0);
  return d;
}

// The folds, in double (long double for sums, so the reference is far more exact than float).
inline double fsum(std::vector<double> const& v) {
  long double s = 0;
  for (double x : v) s += x;
  return static_cast<double>(s);
}
inline double fmean(std::vector<double> const& v) { return fsum(v) / static_cast<double>(v.size()); }
inline double fprod(std::vector<double> const& v) {
  long double p = 1;
  for (double x : v) p *= x;
  return static_cast<double>(p);
}
inline double fmax(std::vector<double> const& v) {  // NaN-propagating, like torch.amax
  double m = -std::numeric_limits<double>::infinity();
  for (double x : v) {
    if (std::isnan(x)) return x;
    m = std::max(m, x);
  }
  return m;
}
inline double fmin(std::vector<double> const& v) {
  double m = std::numeric_limits<double>::infinity();
  for (double x : v) {
    if (std::isnan(x)) return x;
    m = std::min(m, x);
  }
  return m;
}
inline double fargmax(std::vector<double> const& v) {  // first extreme; first NaN wins
  std::size_t best = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return static_cast<double>(i);
    if (v[i] > v[best]) best = i;
  }
  return static_cast<double>(best);
}
inline double fargmin(std::vector<double> const& v) {
  std::size_t best = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return static_cast<double>(i);
    if (v[i] < v[best]) best = i;
  }
  return static_cast<double>(best);
}
inline std::function<double(std::vector<double> const&)> fvar(double correction) {
  return [correction](std::vector<double> const& v) {
    long double m = 0;
    for (double x : v) m += x;
    m /= static_cast<long double>(v.size());
    long double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return static_cast<double>(s / (static_cast<long double>(v.size()) - correction));
  };
}
inline double fsum_abs(std::vector<double> const& v) {
  long double s = 0;
  for (double x : v) s += std::fabs(x);
  return static_cast<double>(s);
}

// ---------------------------------------------------------------------------------------------
// Comparisons
// ---------------------------------------------------------------------------------------------

// The spacing of T's representable numbers at |e| (subnormals included): one ulp of e.
template <class T>
double ulp(double e) {
  static_assert(std::is_floating_point_v<T>);
  double a = std::fabs(e);
  T t = static_cast<T>(a);
  if (std::isinf(t)) t = std::numeric_limits<T>::max();
  if (static_cast<double>(t) > a && t > T(0)) t = std::nextafter(t, T(0));  // round down
  return static_cast<double>(std::nextafter(t, std::numeric_limits<T>::infinity())) -
         static_cast<double>(t);
}

// Bound for one element: ulps * ulp_T(expected) + abs + scale_eps * eps_T * scale[i].
struct Tol {
  double ulps = 4;
  double abs = 0;
  double scale_eps = 0;  // used with a scale array: cancellation-aware absolute bound
};

namespace detail {
template <class TT>
using elem_t = typename TT::value_type;
}

// Compares a tensor (or an expression, evaluated with sd::eval) with the reference.
template <class TT>
void check_close(TT const& t, Array const& expected, Tol tol, std::string const& what,
                 Array const* scale = nullptr) {
  using T = detail::elem_t<TT>;
  static_assert(std::is_floating_point_v<T>, "check_close: floating-point tensors only");
  Array got = of(t);
  INFO(what << ": shape " << str(got.shape) << " vs reference " << str(expected.shape));
  REQUIRE(got.shape == expected.shape);
  std::int64_t bad = 0;
  double worst = 0;
  std::ostringstream first;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    double a = got[i], e = expected[i];
    bool ok;
    double err_ulps = 0;
    if (std::isnan(e)) ok = std::isnan(a);
    else if (std::isinf(e)) ok = a == e;
    else if (std::isnan(a) || std::isinf(a)) ok = false;
    else {
      double u = ulp<T>(e);
      double bound = tol.ulps * u + tol.abs +
                     (scale ? tol.scale_eps * std::numeric_limits<T>::epsilon() * (*scale)[i] : 0.0);
      double err = std::fabs(a - e);
      err_ulps = err / u;
      ok = err <= bound;
      worst = std::max(worst, err_ulps);
    }
    if (!ok) {
      if (bad < 6)
        first << "\n  [" << i << "] got " << std::setprecision(17) << a << " expected " << e
              << " (" << std::setprecision(4) << err_ulps << " ulp)";
      ++bad;
    }
  }
  INFO(bad << " of " << got.numel() << " elements out of tolerance (ulps=" << tol.ulps
           << ", abs=" << tol.abs << ", scale_eps=" << tol.scale_eps << "); worst "
           << worst << " ulp" << first.str());
  CHECK(bad == 0);
}

// Exact equality (integers, bools, and float results that must be exact).
template <class TT>
void check_equal(TT const& t, Array const& expected, std::string const& what) {
  Array got = of(t);
  INFO(what << ": shape " << str(got.shape) << " vs reference " << str(expected.shape));
  REQUIRE(got.shape == expected.shape);
  std::int64_t bad = 0;
  std::ostringstream first;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    double a = got[i], e = expected[i];
    bool ok = (std::isnan(e) && std::isnan(a)) || a == e;
    if (!ok) {
      if (bad < 6) first << "\n  [" << i << "] got " << std::setprecision(17) << a << " expected " << e;
      ++bad;
    }
  }
  INFO(bad << " of " << got.numel() << " elements differ" << first.str());
  CHECK(bad == 0);
}

// ---------------------------------------------------------------------------------------------
// Inputs: a fixed-seed generator independent of solder's Philox (every run sees the same data)
// ---------------------------------------------------------------------------------------------
inline std::mt19937_64& rng() {
  static std::mt19937_64 g(20240611);
  return g;
}

// [rows, cols] filled with 0, 1, 2, ... in row-major order.
inline sd::Tensor<float, 2> iota2(std::int64_t rows, std::int64_t cols) {
  sd::Tensor<float, 2> t(rows, cols);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) t(i, j) = static_cast<float>(i * cols + j);
  return t;
}

// A contiguous tensor of the given sizes with values uniform in [lo, hi) (integers: [lo, hi]
// inclusive; bool: true with probability 1/2).
template <class T, class... I>
auto uniform(double lo, double hi, I... sizes) {
  sd::Tensor<T, static_cast<int>(sizeof...(I))> t(static_cast<std::int64_t>(sizes)...);
  T* p = t.data();
  std::int64_t n = t.numel();
  auto& g = rng();
  if constexpr (std::is_same_v<T, bool>) {
    std::bernoulli_distribution d(0.5);
    for (std::int64_t i = 0; i < n; ++i) p[i] = d(g);
  } else if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<std::int64_t> d(static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi));
    for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(d(g));
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(d(g));
  }
  return t;
}

// A contiguous tensor with the given values (row-major) and sizes.
template <class T, class... I>
auto values(std::vector<T> const& v, I... sizes) {
  sd::Tensor<T, static_cast<int>(sizeof...(I))> t(static_cast<std::int64_t>(sizes)...);
  REQUIRE(static_cast<std::int64_t>(v.size()) == t.numel());
  for (std::size_t i = 0; i < v.size(); ++i) t.data()[i] = v[i];
  return t;
}

template <class T>
constexpr double eps() {
  return static_cast<double>(std::numeric_limits<T>::epsilon());
}

inline constexpr double nan = std::numeric_limits<double>::quiet_NaN();
inline constexpr double inf = std::numeric_limits<double>::infinity();

// Whether s holds `what`.
inline bool contains(std::string const& s, std::string const& what) { return s.find(what) != std::string::npos; }

// The message of the sd::Error that f() throws, or "no error".
template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (sd::Error const& e) {
    return e.what();
  }
  return "no error";
}

// Evaluates e; checks that kernel_count, explain() and the kernels run agree; returns the result.
template <class E>
auto run_counted(E const& e) {
  std::string text = sd::explain(e);
  INFO(text);
  CHECK(text.rfind("solder plan: " + std::to_string(sd::kernel_count<E>) + " kernel", 0) == 0);
  auto before = sd::detail::kernels_run();
  auto r = sd::eval(e);
  CHECK(sd::detail::kernels_run() - before == static_cast<std::uint64_t>(sd::kernel_count<E>));
  return r;
}

}  // namespace ref
