// Reductions and row kernels on sd::Cuda tensors against the host's results: each dim,
// keepdim, full reductions (CUB's device-wide path), integer sums, the run-time split, rows of
// 1 to 4099 columns, few rows (a block per row) and many (a warp per row); float sums of 10^6
// and 10^7 equal terms along every path against the exact sum.
// Needs a GPU: without one its main (gpu_main.cpp) prints "skipped: no CUDA device: ..." and
// exits 77, which ctest reports as skipped.
#include <algorithm>
#include <iomanip>

#include "compare.hpp"

using namespace gpu_test;

namespace {

// The GPU's bound for a float sum of n terms: each thread folds its share, and merge_kernel a
// line's parts, in the host's order (ThreadFold: 128 terms a chunk, 64 chunks a block, then the
// blocks, at most n / 8192 of them in all), with a group's tree (at most 12 steps, CUB's block
// reduction) and a column block's 8 warps in between; each step errs by at most eps relative to
// the running sum. Twice the host's constant (tests/test_edges.cpp), its n / 8192. A thread with
// one accumulator errs by up to its terms' count in eps: so folded, 10^7 terms of 0.1f came to
// 997297 in a row a warp each, and to 1010792 in a column a warp folds whole (the GPU's order,
// replayed on the host).
double sum_bound(double n, double exact) {
  return (2 * (128 + 64 + 2) + 12 + 8 + n / 8192) * std::numeric_limits<float>::epsilon() *
         std::fabs(exact);
}

}  // namespace

// In float; the double instantiations share all but the accumulator type (checked below).
TEST_CASE("reductions: device against host", "[gpu][reduce]") {
  using T = float;
  auto x = sd::rand<T>(sd::shape(129, 257), T(-1), T(1));
  auto d = x.template to<sd::Cuda>();
  double tol = 2e-5;
  for (int dim : {0, 1}) {
    INFO("dim " << dim);
    close(sd::eval(sd::sum(d, dim)), sd::eval(sd::sum(x, dim)), tol * 300);
    close(sd::eval(sd::mean(d, dim, sd::keepdim)), sd::eval(sd::mean(x, dim, sd::keepdim)), tol);
    close(sd::eval(sd::var(d, dim)), sd::eval(sd::var(x, dim)), tol * 10);
    same_bits(sd::eval(sd::max(d, dim)), sd::eval(sd::max(x, dim)));
    same_bits(sd::eval(sd::min(d, dim)), sd::eval(sd::min(x, dim)));
    same_bits(sd::eval(sd::argmax(d, dim)), sd::eval(sd::argmax(x, dim)));
    same_bits(sd::eval(sd::argmin(d, dim)), sd::eval(sd::argmin(x, dim)));
    close(sd::eval(sd::prod(d * T(0.01) + T(1), dim)), sd::eval(sd::prod(x * T(0.01) + T(1), dim)), tol * 10);
  }
  close(sd::eval(sd::sum(d)), sd::eval(sd::sum(x)), tol * 1000);
  same_bits(sd::eval(sd::argmax(d)), sd::eval(sd::argmax(x)));
  // Large full reductions take CUB's device-wide path, over a fused input.
  auto big = sd::rand<T>(sd::shape(1 << 20), T(0), T(1));
  auto bd = big.template to<sd::Cuda>();
  close(sd::eval(sd::sum(bd * T(2))), sd::eval(sd::sum(big * T(2))), tol * 100);
  same_bits(sd::eval(sd::max(sd::exp(bd))), sd::eval(sd::max(sd::exp(big))));
  same_bits(sd::eval(sd::argmin(bd)), sd::eval(sd::argmin(big)));
  // Integer sums widen to int64 and are exact.
  auto ints = sd::eval(sd::cast<std::int32_t>(x * T(100)));
  same_bits(sd::eval(sd::sum(ints.template to<sd::Cuda>(), 1)), sd::eval(sd::sum(ints, 1)));
}

// Reductions over several dims of a 3-D input: the fold walks its line by index, dividing
// for every reduced dim but the outermost, which takes what is left; a permuted input, and int64.
TEST_CASE("reductions over leading, middle and several dims", "[gpu][reduce]") {
  auto x = sd::rand<float>(sd::shape(17, 33, 65), -1.f, 1.f);
  auto d = x.to<sd::Cuda>();
  close(sd::eval(sd::sum(d, {0, 2})), sd::eval(sd::sum(x, {0, 2})), 1e-5);
  close(sd::eval(sd::sum(d, {0, 1})), sd::eval(sd::sum(x, {0, 1})), 1e-5);
  close(sd::eval(sd::mean(d, 1)), sd::eval(sd::mean(x, 1)), 1e-5);
  same_bits(sd::eval(sd::max(d, {1, 2}, sd::keepdim)), sd::eval(sd::max(x, {1, 2}, sd::keepdim)));
  // A permuted input: every axis strided.
  auto p = sd::permute(d, {2, 0, 1});
  auto ph = sd::permute(x, {2, 0, 1});
  close(sd::eval(sd::sum(p, {1, 2})), sd::eval(sd::sum(ph, {1, 2})), 1e-5);
  // int64 inputs: exact.
  auto i = sd::eval(sd::cast<std::int64_t>(x * 1000.f));
  auto id = i.to<sd::Cuda>();
  same_bits(sd::eval(sd::sum(id, {0, 2})), sd::eval(sd::sum(i, {0, 2})));
  same_bits(sd::eval(sd::argmin(id, 2)), sd::eval(sd::argmin(i, 2)));
}

// Reductions over leading dims that keep the last one: a warp takes 32 neighbouring outputs
// (columns_kernel), the lines in chunks merged in order; columns not a multiple of 32 (the last
// warp in part idle), 37 columns; a transposed input, whose neighbouring outputs are not
// neighbours in memory, is read along its contiguous lines instead (lines_kernel).
TEST_CASE("column reductions: a warp per 32 outputs", "[gpu][reduce]") {
  auto x = sd::rand<float>(sd::shape(5000, 1000), -1.f, 1.f);
  auto d = x.to<sd::Cuda>();
  auto const magnitude = sd::eval(sd::sum(sd::abs(x), 0));  // the sums cancel to near 0
  close(sd::eval(sd::sum(d, 0)), sd::eval(sd::sum(x, 0)), magnitude, 1e-6);
  close(sd::eval(sd::mean(d * d, 0, sd::keepdim)), sd::eval(sd::mean(x * x, 0, sd::keepdim)), 1e-5);
  same_bits(sd::eval(sd::argmax(d, 0)), sd::eval(sd::argmax(x, 0)));
  same_bits(sd::eval(sd::min(d, 0)), sd::eval(sd::min(x, 0)));
  auto narrow = sd::rand<float>(sd::shape(5000, 37), -1.f, 1.f);
  auto nd = narrow.to<sd::Cuda>();
  close(sd::eval(sd::var(nd, 0)), sd::eval(sd::var(narrow, 0)), 1e-5);
  same_bits(sd::eval(sd::argmin(nd, 0)), sd::eval(sd::argmin(narrow, 0)));
  close(sd::eval(sd::sum(sd::transpose(d, 0, 1), 0)), sd::eval(sd::sum(sd::transpose(x, 0, 1), 0)),
        sd::eval(sd::sum(sd::abs(sd::transpose(x, 0, 1)), 0)), 1e-6);
  // 40 rows: too few for two parts, so each column is folded whole and stored at once (no
  // merge_kernel).
  auto few = sd::rand<float>(sd::shape(40, 1000), -1.f, 1.f);
  auto fd = few.to<sd::Cuda>();
  close(sd::eval(sd::sum(fd, 0)), sd::eval(sd::sum(few, 0)), 1e-5);
  close(sd::eval(sd::mean(fd * fd, 0, sd::keepdim)), sd::eval(sd::mean(few * few, 0, sd::keepdim)),
        1e-5);
  same_bits(sd::eval(sd::argmax(fd, 0)), sd::eval(sd::argmax(few, 0)));
  // No rows: every column's sum is 0 (too few steps for the warps: lines_kernel).
  same_bits(sd::eval(sd::sum(sd::Tensor<float, 2, sd::Cuda>(0, 40), 0)),
            sd::eval(sd::sum(sd::Tensor<float, 2>(0, 40), 0)));
}

// One value from a long input: each reduction runs device-wide, a nested one (the mean in
// var) first, as a kernel of its own, whose result the outer one's input reads.
TEST_CASE("one value from a long input: device-wide reductions", "[gpu][reduce]") {
  auto v = sd::rand<float>(sd::shape((1 << 20) + 3), 0.f, 1.f);
  auto x = sd::randn<float>(sd::shape(1031, 1029));
  auto vd = v.to<sd::Cuda>();
  auto d = x.to<sd::Cuda>();
  close(sd::eval(sd::var(vd, 0)), sd::eval(sd::var(v, 0)), 1e-5);
  CHECK_THAT(sd::explain(sd::var(vd, 0)), Catch::Contains("over all of the GPU"));
  CHECK_THAT(sd::explain(sd::var(v, 0)), !Catch::Contains("over all of the GPU"));
  close(sd::eval(sd::sqrt(sd::mean(d * d))), sd::eval(sd::sqrt(sd::mean(x * x))), 1e-5);
  close(sd::eval(sd::sum(d) / 7.f + sd::max(d)), sd::eval(sd::sum(x) / 7.f + sd::max(x)), 1e-3);
  auto shifted = [](auto const& t) { return sd::sum(sd::exp(t - sd::max(t, {0, 1}, sd::keepdim))); };
  close(sd::eval(shifted(d)), sd::eval(shifted(x)), 1e-4);
}

// Few long lines: each line is folded in chunks, a block each, and the chunks are merged in
// order. Rows that are not aligned for vector loads (100,003 floats), rows that are, a
// reduction over leading dims (the strided walk), batch norm's var over the rows of a narrow
// matrix (a run-time break whose reduction is folded in chunks) and a whole reduction too short
// to go device-wide.
TEST_CASE("few long lines: folded in chunks", "[gpu][reduce]") {
  auto x = sd::rand<float>(sd::shape(3, 100003), -1.f, 1.f);
  auto d = x.to<sd::Cuda>();
  close(sd::eval(sd::sum(d, 1)), sd::eval(sd::sum(x, 1)), 1e-5);
  close(sd::eval(sd::mean(d, 1, sd::keepdim)), sd::eval(sd::mean(x, 1, sd::keepdim)), 1e-5);
  same_bits(sd::eval(sd::max(d, 1)), sd::eval(sd::max(x, 1)));
  same_bits(sd::eval(sd::argmax(d, 1)), sd::eval(sd::argmax(x, 1)));
  same_bits(sd::eval(sd::argmin(d * d, 1)), sd::eval(sd::argmin(x * x, 1)));
  // One line: a single output, but not a reduction over all dims, so in chunks (not CUB).
  auto one = sd::rand<float>(sd::shape(1, 200003), -1.f, 1.f);
  close(sd::eval(sd::sum(one.to<sd::Cuda>(), 1)), sd::eval(sd::sum(one, 1)), 1e-5);
  auto aligned = sd::rand<float>(sd::shape(4, 65536), -1.f, 1.f);
  auto ad = aligned.to<sd::Cuda>();
  close(sd::eval(sd::sum(ad * 2.f, 1)), sd::eval(sd::sum(aligned * 2.f, 1)), 1e-5);
  same_bits(sd::eval(sd::argmax(ad, 1)), sd::eval(sd::argmax(aligned, 1)));
  auto narrow = sd::rand<float>(sd::shape(50000, 3), -1.f, 1.f);
  auto nd = narrow.to<sd::Cuda>();
  close(sd::eval(sd::sum(nd, 0)), sd::eval(sd::sum(narrow, 0)), 1e-5);
  close(sd::eval(sd::var(nd, 0)), sd::eval(sd::var(narrow, 0)), 1e-5);
  auto image = sd::rand<float>(sd::shape(64, 5, 1024), -1.f, 1.f);
  auto id = image.to<sd::Cuda>();
  close(sd::eval(sd::mean(id, {0, 2})), sd::eval(sd::mean(image, {0, 2})), 1e-5);
  auto small = sd::rand<float>(sd::shape(100, 300), -1.f, 1.f);
  close(sd::eval(sd::sum(small.to<sd::Cuda>())), sd::eval(sd::sum(small)), 1e-5);
  // Row ops over few long rows: each reduction a kernel of its own, in chunks.
  auto g = sd::rand<float>(sd::shape(100003));
  auto gd = g.to<sd::Cuda>();
  close(sd::eval(sd::softmax(d, 1)), sd::eval(sd::softmax(x, 1)), 1e-5);
  close(sd::eval(sd::layer_norm(d, gd, gd)), sd::eval(sd::layer_norm(x, g, g)), 1e-4);
  CHECK_THAT(sd::explain(sd::softmax(d, 1)), Catch::Contains("over all of the GPU"));
}

TEST_CASE("reductions and rows in double", "[gpu][reduce][rows]") {
  auto x = sd::randn<double>(sd::shape(129, 1031));
  auto d = x.to<sd::Cuda>();
  close(sd::eval(sd::sum(d, 1)), sd::eval(sd::sum(x, 1)), 1e-12);
  same_bits(sd::eval(sd::argmax(d, 0)), sd::eval(sd::argmax(x, 0)));
  close(sd::eval(sd::softmax(d, 1)), sd::eval(sd::softmax(x, 1)), 1e-12);
}

TEST_CASE("reductions broadcast along different dims: the run-time split", "[gpu][reduce]") {
  auto x = sd::rand<float>(sd::shape(37, 53));
  auto d = x.to<sd::Cuda>();
  close(sd::eval(sd::sum(d, 0, sd::keepdim) + sd::sum(d, 1, sd::keepdim)),
        sd::eval(sd::sum(x, 0, sd::keepdim) + sd::sum(x, 1, sd::keepdim)), 1e-5);
}

// A few rows take a block each, thousands a warp each (lines_kernel); 1031 columns are not
// aligned for vector loads, 1024 are. Softmax keeps exp(x - max) in shared memory for its row,
// up to 8192 floats of a block's row and 1024 of a warp's: 10007 and 2048 columns go past that.
TEST_CASE("row kernels: device against host", "[gpu][rows]") {
  using T = float;
  double tol = 1e-5;
  std::pair<std::int64_t, std::int64_t> const shapes[] = {
      {65, 1},    {65, 7},      {65, 1024},   {65, 4099},  {65, 10007},
      {6000, 7},  {6000, 1024}, {6000, 1031}, {6000, 2048}};
  for (auto [rows, cols] : shapes) {
    INFO("rows " << rows << ", cols " << cols);
    auto x = sd::randn<T>(sd::shape(rows, cols));
    auto g = sd::rand<T>(sd::shape(cols));
    auto b = sd::rand<T>(sd::shape(cols));
    auto d = x.template to<sd::Cuda>();
    auto gd = g.template to<sd::Cuda>();
    auto bd = b.template to<sd::Cuda>();
    close(sd::eval(sd::softmax(d, 1)), sd::eval(sd::softmax(x, 1)), tol);
    close(sd::eval(sd::log_softmax(d, 1)), sd::eval(sd::log_softmax(x, 1)), tol);
    close(sd::eval(sd::layer_norm(d, gd, bd)), sd::eval(sd::layer_norm(x, g, b)), tol * 10);
    close(sd::eval(sd::rms_norm(d, gd)), sd::eval(sd::rms_norm(x, g)), tol * 10);
    close(sd::eval(sd::softmax(d, 0)), sd::eval(sd::softmax(x, 0)), tol);  // along columns
    close(sd::eval(sd::var(d, 1)), sd::eval(sd::var(x, 1)), tol * 10);
    same_bits(sd::eval(sd::argmax(d, 1)), sd::eval(sd::argmax(x, 1)));
    // Stored as double: two values per vector store against the record's four per load, so
    // threads read records that others wrote.
    sd::Tensor<double, 2, sd::Cuda> wide(rows, cols);
    wide = sd::softmax(d, 1);
    close(wide, sd::eval(sd::softmax(x, 1)), tol);
  }
}

// A use whose record holds its whole row skips the input it wraps, and the kernel links again
// without it (GroupLinks::Skip): softmax used three times in one kernel (one record, three
// uses), softmax next to log_softmax (their max and sum shared under rule 4), and softmax of a
// softmax (records nested in records). Rows of 1024 are held whole by a block's and by a
// warp's room; a warp's room holds only the inner one of the nested records, so that kernel
// links a third time, with no use skipped. 10007 and 2048 columns are past the room.
TEST_CASE("row kernels: uses of a record that holds the whole row", "[gpu][rows]") {
  std::pair<std::int64_t, std::int64_t> const shapes[] = {
      {65, 1024}, {65, 10007}, {6000, 1024}, {6000, 2048}};
  for (auto [rows, cols] : shapes) {
    INFO("rows " << rows << ", cols " << cols);
    auto x = sd::randn<float>(sd::shape(rows, cols));
    auto d = x.to<sd::Cuda>();
    auto thrice = [](auto const& t) {
      auto s = sd::softmax(t, 1);
      return s * s + s;
    };
    close(sd::eval(thrice(d)), sd::eval(thrice(x)), 1e-5);
    close(sd::eval(sd::softmax(d, 1) - sd::log_softmax(d, 1)),
          sd::eval(sd::softmax(x, 1) - sd::log_softmax(x, 1)), 1e-5);
    close(sd::eval(sd::softmax(sd::softmax(d, 1), 1)), sd::eval(sd::softmax(sd::softmax(x, 1), 1)),
          1e-5);
  }
}

// A fold whose input reads two tensors of one type loads each (d * e); where they are one
// tensor it loads it once (d * d, and the variance's (x - mean)^2 above).
TEST_CASE("folds over two inputs of one type: two tensors, or one read twice", "[gpu][rows]") {
  for (std::int64_t rows : {65, 6000}) {
    INFO("rows " << rows);
    auto x = sd::randn<float>(sd::shape(rows, 1024));
    auto y = sd::randn<float>(sd::shape(rows, 1024));
    auto d = x.to<sd::Cuda>();
    auto e = y.to<sd::Cuda>();
    auto both = [](auto const& a, auto const& b) {
      return sd::sum(a * b, 1, sd::keepdim) + sd::sum(a * a, 1, sd::keepdim);
    };
    close(sd::eval(both(d, e)), sd::eval(both(x, y)), 1e-5);
  }
}

// Rows of a static length (sd::ext<sd::dyn, 1024>): with a warp per row, lines_kernel's
// variant with compile-time bounds, every step of a row unrolled. Rows not aligned for vector
// loads (columns 1 to 1024 of [R, 1025]) take its scalar path; few rows (a block each), the
// kernel for any length; half rows, the variant with four values a vector; a step of four loads
// (x * y + x * x), one step at a time.
TEST_CASE("rows of a static length: loops unrolled", "[gpu][rows]") {
  using Rows = sd::Tensor<float, sd::ext<sd::dyn, 1024>, sd::Cuda>;
  for (std::int64_t rows : {6000, 65}) {
    INFO("rows " << rows);
    auto x = sd::randn<float>(sd::shape(rows, 1024));
    auto g = sd::rand<float>(sd::shape(1024));
    auto b = sd::rand<float>(sd::shape(1024));
    Rows d = x.to<sd::Cuda>();
    auto gd = g.to<sd::Cuda>();
    auto bd = b.to<sd::Cuda>();
    close(Rows(sd::softmax(d, 1)), sd::eval(sd::softmax(x, 1)), 1e-5);
    close(Rows(sd::log_softmax(d, 1)), sd::eval(sd::log_softmax(x, 1)), 1e-5);
    close(Rows(sd::layer_norm(d, gd, bd)), sd::eval(sd::layer_norm(x, g, b)), 1e-4);
    close(Rows(sd::rms_norm(d, gd)), sd::eval(sd::rms_norm(x, g)), 1e-4);
    auto y = sd::randn<float>(sd::shape(rows, 1024));
    Rows e = y.to<sd::Cuda>();
    close(Rows(sd::rms_norm(d * e + d * d, gd)), sd::eval(sd::rms_norm(x * y + x * x, g)), 1e-4);
    auto wide = sd::randn<float>(sd::shape(rows, 1025));
    Rows unaligned = sd::slice(wide.to<sd::Cuda>(), 1, 1, 1025);
    close(Rows(sd::softmax(unaligned, 1)), sd::eval(sd::softmax(sd::slice(wide, 1, 1, 1025), 1)), 1e-5);
    sd::Tensor<sd::half, sd::ext<sd::dyn, 1024>, sd::Cuda> h = sd::cast<sd::half>(d);
    close(sd::eval(sd::softmax(h, 1)), sd::eval(sd::softmax(sd::cast<sd::half>(x), 1)), 1e-3);
  }
}

// Float sums of 10^6 and 10^7 equal terms along every path (issue 27), against the exact sum:
// a few long rows and columns in chunks (chunk_kernel, a block per chunk: vector loads along a
// row, the index walk down a column or a middle dim); rows in a row kernel, a block each and a
// warp each (lines_kernel: their sum doubled, so that the root is no reduction); columns too
// many to chunk and strided, so no warp takes 32 of them (lines_kernel, a block each, the index
// walk); columns a warp per 32 (columns_kernel) in parts, and folded whole where there are 32
// for every block the GPU holds; everything (CUB's device-wide reduce). The inputs of many
// lines are one row expanded (stride 0), so that they take no memory.
TEST_CASE("float sums of 1e6 and 1e7 equal terms are accurate along every GPU path", "[gpu][reduce]") {
  namespace dc = sd::detail::cuda;
  dc::DeviceInfo const& gpu = dc::device_info();
  // Lines from which each gets a warp (group_for); lines too many to fold in chunks (parts_for),
  // but each still a block; columns that a warp each folds whole.
  std::int64_t const warp_lines = std::int64_t(gpu.sm_count) * gpu.max_threads_per_sm / 32 / 4;
  std::int64_t const block_lines = dc::resident_blocks();
  std::int64_t const whole_columns = 32 * dc::resident_blocks();
  for (std::int64_t n : {std::int64_t{1000000}, std::int64_t{10000000}}) {
    double const term = static_cast<double>(0.1f), exact = term * static_cast<double>(n);
    INFO("n = " << n << ", exact sum " << exact);
    // Every output of t is `times` the exact sum.
    auto check = [&](auto const& t, char const* path, double times = 1) {
      auto const v = sd::to_vector(t);
      REQUIRE(!v.empty());
      double const want = times * exact;
      for (std::size_t i = 0; i < v.size(); ++i) {
        INFO(path << ", output " << i << ": got " << std::setprecision(10) << v[i] << ", off by "
                  << std::fabs(v[i] - want));
        CHECK(std::fabs(v[i] - want) <= sum_bound(static_cast<double>(n), want));
      }
    };
    auto wide = sd::full<float, sd::Cuda>(sd::shape(2, n), 0.1f);
    auto tall = sd::full<float, sd::Cuda>(sd::shape(n, 2), 0.1f);
    auto cube = sd::full<float, sd::Cuda>(sd::shape(2, n, 2), 0.1f);
    auto row = sd::full<float, sd::Cuda>(sd::shape(n), 0.1f);
    auto across = sd::full<float, sd::Cuda>(sd::shape(whole_columns), 0.1f);
    auto every_other = sd::slice(sd::full<float, sd::Cuda>(sd::shape(2 * block_lines), 0.1f), 0,
                                 0, 2 * block_lines, 2);  // stride 2

    check(sd::eval(sd::sum(wide, 1)), "rows in chunks");
    check(sd::eval(sd::sum(tall, 0)), "columns in chunks");
    check(sd::eval(sd::sum(cube, 1)), "a middle dim in chunks");
    check(sd::eval(sd::sum(sd::expand(row, {64, n}), 1) * 2.f), "rows, a block each", 2);
    check(sd::eval(sd::sum(sd::expand(row, {std::max<std::int64_t>(64, warp_lines), n}), 1) * 2.f),
          "rows, a warp each", 2);
    check(sd::eval(sd::sum(sd::expand(every_other, {n, block_lines}), 0)),
          "strided columns, a block each");
    check(sd::eval(sd::sum(sd::expand(sd::slice(across, 0, 0, 512), {n, 512}), 0)),
          "columns, a warp per 32, in parts");
    check(sd::eval(sd::sum(sd::expand(across, {n, whole_columns}), 0)),
          "columns, a warp per 32, whole");
    check(sd::eval(sd::sum(tall)), "everything, device-wide", 2);
    sd::Tensor<float, 1, sd::Cuda> means = sd::mean(wide, 1);
    for (float m : sd::to_vector(means)) {
      INFO("mean of rows in chunks: got " << std::setprecision(10) << m);
      CHECK(std::fabs(m - term) <= sum_bound(static_cast<double>(n), term));
    }
  }
}
