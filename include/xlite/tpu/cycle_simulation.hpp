#pragma once

// The systolic array stepped cycle by cycle, cell by cell. Operands move one cell per cycle,
// right along the rows and down the columns; a cell multiplies and adds only when the two
// operands of one product meet in it. It is slow (Rows x Cols work per cycle) and made for
// tests: its cycle count must equal tpu/cost_model.hpp's closed form, and its results must
// match tpu/dataflow_product.hpp bit for bit.
//
// Every token in flight belongs to a fold. Tokens that carry no work still flow through
// the array and take their cycles, as the hardware clocks them: these are the rows and
// columns that a partial fold leaves empty. Folds start as the timing says:
//   scalesim   a fold starts once the previous one has left the array;
//   pipelined  a fold starts `gap` cycles after the previous one started. The cost model's
//              gap is max(T, Rows). Here the held tile (weight- and input-stationary) loads
//              into shadow registers while the previous fold streams, and accumulators
//              (output-stationary) drain while the next fold computes.
// The simulation checks every cell for hazards: an operand that meets another fold's or
// product's, an input that finds no weight of its fold, a weight overwritten before use, a
// sum parked over one not yet drained, two folds fed into one row in the same cycle. It
// throws std::logic_error on the first one, so a schedule that is too tight fails instead
// of computing wrong numbers.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "xlite/core/error.hpp"
#include "xlite/tpu/dataflow.hpp"
#include "xlite/tpu/dataflow_product.hpp"
#include "xlite/tpu/matrix.hpp"
#include "xlite/tpu/report.hpp"

namespace xlite::tpu {

template <class Acc>
struct simulation {
  matrix<Acc> out;
  std::int64_t cycles = 0; // until the last result is written
  std::int64_t macs = 0;   // multiply-adds of real operands
  std::int64_t folds = 0;
};

namespace detail {

// A value in a cell's register. `present` marks a slot of some fold's stream; `work` marks
// a slot that carries a real element. `index` is the operand's step k (output-stationary),
// the output row (a partial sum), or the row a weight is bound for.
template <class Acc>
struct token {
  bool present = false;
  bool work = false;
  Acc value{};
  std::int64_t fold = -1;
  std::int64_t index = 0;
};

template <class Acc>
class grid {
public:
  grid(std::int64_t rows, std::int64_t cols) : cols_(cols), cells_(static_cast<std::size_t>(rows * cols)) {}
  token<Acc>& operator()(std::int64_t r, std::int64_t c) { return cells_[static_cast<std::size_t>(r * cols_ + c)]; }
  bool empty() const {
    return std::none_of(cells_.begin(), cells_.end(), [](const token<Acc>& t) { return t.present; });
  }

private:
  std::int64_t cols_;
  std::vector<token<Acc>> cells_;
};

[[noreturn]] inline void hazard(const char* what, std::int64_t cycle, std::int64_t r, std::int64_t c) {
  throw std::logic_error(
      xlite::detail::message("systolic array simulation: ", what, " in cycle ", cycle, " at cell (", r, ", ", c, ")"));
}

// The folds in SCALE-Sim's order (column folds outer), as the first row and column of the
// mapping's rows and columns (tpu/dataflow.hpp) each covers.
struct fold_origin {
  std::int64_t row0 = 0;
  std::int64_t col0 = 0;
};

template <std::int64_t Rows, std::int64_t Cols>
std::vector<fold_origin> folds_of(const spatial_mapping& s) {
  std::vector<fold_origin> folds;
  for (std::int64_t col0 = 0; col0 < s.cols; col0 += Cols) {
    for (std::int64_t row0 = 0; row0 < s.rows; row0 += Rows) folds.push_back({row0, col0});
  }
  return folds;
}

// When each fold starts streaming, decided cycle by cycle from the array's state.
class fold_starts {
public:
  fold_starts(std::int64_t folds, std::int64_t steps, timing mode, std::int64_t gap)
      : steps_(steps), mode_(mode), gap_(gap), start_(static_cast<std::size_t>(folds), -1) {}

  std::int64_t count() const noexcept { return static_cast<std::int64_t>(start_.size()); }
  std::int64_t started() const noexcept { return started_; }
  std::int64_t start(std::int64_t f) const noexcept { return start_[static_cast<std::size_t>(f)]; }
  bool all_fed(std::int64_t cycle) const noexcept {
    return started_ == count() && cycle >= start(count() - 1) + steps_;
  }

  // Whether the next fold may start in `cycle`. The first once `ready` (the dataflow's
  // own condition: its held tile in place); in scalesim each next one once the array is
  // empty, the previous fold wholly fed and `ready`; pipelined, `gap` cycles after the
  // previous one, ready or not: the hazard checks catch a fold that starts too early.
  bool may_start(std::int64_t cycle, bool array_empty, bool ready) const noexcept {
    if (started_ == count()) return false;
    if (started_ == 0) return ready;
    const std::int64_t previous = start(started_ - 1);
    return mode_ == timing::scalesim ? ready && array_empty && cycle >= previous + steps_ : cycle >= previous + gap_;
  }

  void begin(std::int64_t cycle) { start_[static_cast<std::size_t>(started_++)] = cycle; }

  // The fold whose step `cycle - start - skew` falls in [0, steps): at most one, else two
  // folds would enter one row or column in the same cycle.
  std::optional<std::pair<std::int64_t, std::int64_t>> feeding(std::int64_t cycle, std::int64_t skew, std::int64_t r,
                                                               std::int64_t c) const {
    std::optional<std::pair<std::int64_t, std::int64_t>> found;
    for (std::int64_t f = started_ - 1; f >= 0; --f) { // later folds started later
      const std::int64_t step = cycle - start(f) - skew;
      if (step >= steps_) break;
      if (step < 0) continue;
      if (found) hazard("two folds are fed into one row or column", cycle, r, c);
      found = std::pair{f, step};
    }
    return found;
  }

private:
  std::int64_t steps_;
  timing mode_;
  std::int64_t gap_;
  std::vector<std::int64_t> start_;
  std::int64_t started_ = 0;
};

// Output-stationary: fold (i0, j0) keeps C's tile rows [i0, i0 + Rows) and columns
// [j0, j0 + Cols) in the cells. A's rows enter from the left and B's columns from the top,
// skewed by one cycle per row or column. After its last product a cell parks its sum in
// a holding register (the accumulators are double-buffered). Once a column's holding
// registers are all full, its drain chain takes them at once and writes one to C per
// cycle from the bottom, Rows cycles, while the next fold sums.
template <std::int64_t Rows, std::int64_t Cols, class Acc>
std::int64_t run_output_stationary(const std::vector<Acc>& a, const std::vector<Acc>& b, matrix<Acc>& c, std::int64_t k,
                                   timing mode, std::int64_t gap, std::int64_t& macs, std::int64_t& fold_count) {
  const std::int64_t m = c.rows(), n = c.cols();
  const std::vector<fold_origin> folds = folds_of<Rows, Cols>({m, n, k});
  fold_count = static_cast<std::int64_t>(folds.size());
  fold_starts starts(fold_count, k, mode, gap);
  grid<Acc> left(Rows, Cols), top(Rows, Cols), acc(Rows, Cols), held(Rows, Cols), chain(Rows, Cols);
  std::vector<std::int64_t> draining(Cols, 0); // writes left in each column's drain
  for (std::int64_t t = 0;; ++t) {
    const bool empty = left.empty() && top.empty() && acc.empty() && held.empty() && chain.empty();
    if (starts.may_start(t, empty, true)) starts.begin(t);
    if (starts.all_fed(t) && empty) return t;
    for (std::int64_t col = 0; col < Cols; ++col) {
      if (draining[col] == 0) {
        bool full = true;
        for (std::int64_t r = 0; r < Rows; ++r) full = full && held(r, col).present;
        if (!full) continue;
        for (std::int64_t r = 0; r < Rows; ++r) chain(r, col) = std::exchange(held(r, col), {});
        draining[col] = Rows;
      }
      const token<Acc>& out = chain(Rows - 1, col);
      const fold_origin& o = folds[static_cast<std::size_t>(out.fold)];
      if (out.work) c(o.row0 + out.index, o.col0 + col) = out.value;
      for (std::int64_t r = Rows - 1; r > 0; --r) chain(r, col) = chain(r - 1, col);
      chain(0, col) = {};
      --draining[col];
    }
    grid<Acc> next_left(Rows, Cols), next_top(Rows, Cols);
    for (std::int64_t r = 0; r < Rows; ++r) {
      for (std::int64_t col = 0; col < Cols; ++col) {
        token<Acc> x, w;
        if (col > 0) {
          x = left(r, col - 1);
        } else if (const auto fed = starts.feeding(t, r, r, col)) {
          const auto [f, step] = *fed;
          const std::int64_t i = folds[static_cast<std::size_t>(f)].row0 + r;
          x = {true, i < m, i < m ? a[i * k + step] : Acc(0), f, step};
        }
        if (r > 0) {
          w = top(r - 1, col);
        } else if (const auto fed = starts.feeding(t, col, r, col)) {
          const auto [f, step] = *fed;
          const std::int64_t j = folds[static_cast<std::size_t>(f)].col0 + col;
          w = {true, j < n, j < n ? b[step * n + j] : Acc(0), f, step};
        }
        if (x.present != w.present || (x.present && (x.fold != w.fold || x.index != w.index))) {
          hazard("the operands of different products meet", t, r, col);
        }
        if (x.present) {
          token<Acc>& sum = acc(r, col);
          if (!sum.present) sum = {true, x.work && w.work, Acc(0), x.fold, r};
          if (x.work && w.work) {
            sum.value = std::fma(x.value, w.value, sum.value);
            ++macs;
          }
          if (x.index == k - 1) { // the fold's last product in this cell
            if (held(r, col).present) hazard("a sum is parked before the last one was drained", t, r, col);
            held(r, col) = std::exchange(sum, {});
          }
        }
        // Operands leaving the right or bottom edge are done.
        if (col + 1 < Cols) next_left(r, col) = x;
        if (r + 1 < Rows) next_top(r, col) = w;
      }
    }
    left = std::move(next_left);
    top = std::move(next_top);
    if (t > (fold_count + 2) * (2 * Rows + Cols + k + gap)) hazard("the simulation does not finish", t, 0, 0);
  }
}

// Weight-stationary: fold (k0, j0) holds B's rows [k0, k0 + Rows) and columns
// [j0, j0 + Cols) in the cells. Weights travel down each column (column c starting c
// cycles after column 0, the deepest row's first), and each latches into its row's shadow
// register: Rows cycles to load. A cell swaps its shadow in when the fold's first input
// reaches it. A's rows stream from the left (A(i, k0 + r) into row r, skewed) while
// partial sums enter each column's top as +0, gain a product per row and are written from
// the bottom row to C: by the first row fold, added to after.
// `held_first` (input-stationary run as weight-stationary on C^T = B^T A^T) multiplies the
// held operand first, so that each product is A's element times B's as in gemm(): the
// same NaN comes out when both are NaN.
template <std::int64_t Rows, std::int64_t Cols, class Acc>
std::int64_t run_weight_stationary(const std::vector<Acc>& a, const std::vector<Acc>& b, matrix<Acc>& c, std::int64_t k,
                                   timing mode, std::int64_t gap, bool held_first, std::int64_t& macs,
                                   std::int64_t& fold_count) {
  const std::int64_t m = c.rows(), n = c.cols();
  const std::vector<fold_origin> folds = folds_of<Rows, Cols>({k, n, m});
  fold_count = static_cast<std::int64_t>(folds.size());
  fold_starts starts(fold_count, m, mode, gap);
  std::vector<std::int64_t> load_start; // per fold, the cycle its weights enter column 0
  grid<Acc> transit(Rows, Cols), shadow(Rows, Cols), active(Rows, Cols), left(Rows, Cols), sums(Rows, Cols);
  for (std::int64_t t = 0;; ++t) {
    const bool empty = left.empty() && sums.empty();
    const token<Acc>& first = shadow(0, 0); // the next fold streams once row 0 has its weight
    const bool weights_ready = first.present && first.fold == starts.started() && first.index == 0;
    if (starts.may_start(t, empty, weights_ready)) starts.begin(t);
    // Loads: scalesim into an empty array; pipelined Rows cycles before the fold's start.
    const std::int64_t next = static_cast<std::int64_t>(load_start.size());
    if (next < fold_count) {
      const bool load =
          next == 0 || (mode == timing::scalesim ? starts.started() == next && empty && t >= starts.start(next - 1) + m
                                                 : t >= next * gap);
      if (load) load_start.push_back(t);
    }
    if (starts.all_fed(t) && empty && static_cast<std::int64_t>(load_start.size()) == fold_count) return t;

    grid<Acc> next_left(Rows, Cols), next_sums(Rows, Cols), next_shadow = shadow;
    std::vector<bool> swapped(static_cast<std::size_t>(Rows * Cols), false);
    for (std::int64_t r = 0; r < Rows; ++r) {
      for (std::int64_t col = 0; col < Cols; ++col) {
        token<Acc> x, s;
        if (col > 0) {
          x = left(r, col - 1);
        } else if (const auto fed = starts.feeding(t, r, r, col)) {
          const auto [f, i] = *fed;
          const std::int64_t kk = folds[static_cast<std::size_t>(f)].row0 + r;
          x = {true, kk < k, kk < k ? a[i * k + kk] : Acc(0), f, i};
        }
        if (r > 0) {
          s = sums(r - 1, col);
        } else if (const auto fed = starts.feeding(t, col, r, col)) {
          const auto [f, i] = *fed;
          s = {true, folds[static_cast<std::size_t>(f)].col0 + col < n, Acc(0), f, i};
        }
        if (x.present != s.present || (x.present && (x.fold != s.fold || x.index != s.index))) {
          hazard("an input meets another product's partial sum", t, r, col);
        }
        if (!x.present) continue;
        token<Acc>& w = active(r, col);
        if (w.fold != x.fold) { // the fold's first input: its weight comes out of the shadow
          const token<Acc>& waiting = shadow(r, col);
          if (!waiting.present || waiting.fold != x.fold || waiting.index != r) {
            hazard("an input arrives before its fold's weight", t, r, col);
          }
          w = waiting;
          next_shadow(r, col) = {};
          swapped[static_cast<std::size_t>(r * Cols + col)] = true;
        }
        if (x.work && s.work && w.work) {
          s.value = held_first ? std::fma(w.value, x.value, s.value) : std::fma(x.value, w.value, s.value);
          ++macs;
        }
        if (r + 1 == Rows) { // leaves the bottom into C
          if (s.work) {
            const fold_origin& o = folds[static_cast<std::size_t>(s.fold)];
            Acc& into = c(s.index, o.col0 + col);
            into = o.row0 == 0 ? s.value : into + s.value;
          }
        } else {
          next_sums(r, col) = s;
        }
        if (col + 1 < Cols) next_left(r, col) = x;
      }
    }
    grid<Acc> next_transit(Rows, Cols);
    for (std::int64_t col = 0; col < Cols; ++col) {
      for (std::int64_t r = 0; r < Rows; ++r) {
        token<Acc> arriving = r > 0 ? transit(r - 1, col) : token<Acc>{};
        if (r == 0) {
          for (std::size_t f = 0; f < load_start.size(); ++f) {
            const std::int64_t shift = t - load_start[f] - col;
            if (shift < 0 || shift >= Rows) continue;
            const std::int64_t row = Rows - 1 - shift, kk = folds[f].row0 + row, j = folds[f].col0 + col;
            const bool work = kk < k && j < n;
            arriving = {true, work, work ? b[kk * n + j] : Acc(0), static_cast<std::int64_t>(f), row};
          }
        }
        if (!arriving.present) continue;
        if (arriving.index != r) {
          next_transit(r, col) = arriving;
          continue;
        }
        const token<Acc>& waiting = shadow(r, col); // latch: the shadow must be free or freed now
        if (waiting.present && !swapped[static_cast<std::size_t>(r * Cols + col)]) {
          hazard("a weight is overwritten before its fold used it", t, r, col);
        }
        next_shadow(r, col) = arriving;
      }
    }
    left = std::move(next_left);
    sums = std::move(next_sums);
    shadow = std::move(next_shadow);
    transit = std::move(next_transit);
    if (t > (fold_count + 2) * (2 * Rows + Cols + m + gap)) hazard("the simulation does not finish", t, 0, 0);
  }
}

template <class Acc>
std::vector<Acc> transposed(const std::vector<Acc>& x, std::int64_t rows, std::int64_t cols) {
  std::vector<Acc> t(x.size());
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) t[static_cast<std::size_t>(j * rows + i)] = x[i * cols + j];
  }
  return t;
}

// The simulation with pipelined folds `gap` cycles apart (the tests also try a gap one
// shorter than the cost model's, which must fail).
template <std::int64_t Rows, std::int64_t Cols, dataflow_kind D, class Acc>
simulation<Acc> simulate_cells(const std::vector<Acc>& a, const std::vector<Acc>& b, const gemm_shape& g, timing mode,
                               std::int64_t gap, bool held_first = false) {
  if constexpr (std::same_as<D, dataflow::input_stationary>) {
    // Input-stationary is weight-stationary on C^T = B^T A^T: A is what the cells hold.
    simulation<Acc> sim = simulate_cells<Rows, Cols, dataflow::weight_stationary>(
        transposed(b, g.k, g.n), transposed(a, g.m, g.k), {g.n, g.k, g.m}, mode, gap, true);
    matrix<Acc> c(g.m, g.n);
    for (std::int64_t i = 0; i < g.m; ++i) {
      for (std::int64_t j = 0; j < g.n; ++j) c(i, j) = sim.out(j, i);
    }
    sim.out = std::move(c);
    return sim;
  } else {
    simulation<Acc> sim{matrix<Acc>(g.m, g.n)};
    if (g.macs() == 0) return sim; // nothing streams: no folds
    if constexpr (std::same_as<D, dataflow::output_stationary>) {
      sim.cycles = run_output_stationary<Rows, Cols>(a, b, sim.out, g.k, mode, gap, sim.macs, sim.folds);
    } else {
      sim.cycles = run_weight_stationary<Rows, Cols>(a, b, sim.out, g.k, mode, gap, held_first, sim.macs, sim.folds);
    }
    return sim;
  }
}

} // namespace detail

// C = A B on a Rows x Cols array with the given dataflow, every cell stepped, folds
// scheduled as `mode` says (pipelined: max(T, Rows) cycles apart).
template <std::int64_t Rows, std::int64_t Cols, dataflow_kind D, class In, class Acc, class TA, class TB>
simulation<Acc> simulate_cells(matrix_view<TA> a, matrix_view<TB> b, timing mode) {
  const gemm_shape g{a.rows, a.cols, b.cols};
  const std::int64_t gap = std::max(map_gemm<D>(g).steps, Rows);
  return detail::simulate_cells<Rows, Cols, D>(detail::to_cells<In, Acc>(a), detail::to_cells<In, Acc>(b), g, mode,
                                               gap);
}

} // namespace xlite::tpu
