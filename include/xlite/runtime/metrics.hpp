#pragma once

// xlite's metrics report, after PyTorch/XLA's torch_xla.debug.metrics. Counters count
// events (MarkStep, CachedCompile, ...); metrics are series of samples with a unit
// (CompileTime, ExecuteTime, ...), kept as a count, a sum and the last 1024 samples, from
// which report() prints rates and percentiles. Both are created on first use and live as
// long as the program, so a handle taken once stays valid; clear_all() zeroes them, for
// tests and for measuring one part of a program. Everything here is thread safe: the
// device worker records ExecuteTime while the host traces.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "xlite/core/env.hpp"
#include "xlite/core/error.hpp"
#include "xlite/runtime/memory.hpp"

namespace xlite::metrics {

// ---- Counters ----

namespace detail {

struct counter_registry {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<std::atomic<std::int64_t>>, std::less<>> counters;

  std::atomic<std::int64_t>& get(std::string_view name) {
    std::scoped_lock lock(mutex);
    auto it = counters.find(name);
    if (it == counters.end()) {
      it = counters.emplace(std::string(name), std::make_unique<std::atomic<std::int64_t>>(0)).first;
    }
    return *it->second;
  }
};

inline counter_registry& counters() {
  static counter_registry registry;
  return registry;
}

} // namespace detail

// A counter by name: look it up once and keep the reference where it is hot.
inline std::atomic<std::int64_t>& counter(std::string_view name) { return detail::counters().get(name); }

inline void increment(std::string_view name, std::int64_t by = 1) {
  counter(name).fetch_add(by, std::memory_order_relaxed);
}

// 0 for a counter never incremented.
inline std::int64_t counter_value(std::string_view name) {
  auto& registry = detail::counters();
  std::scoped_lock lock(registry.mutex);
  const auto it = registry.counters.find(name);
  return it == registry.counters.end() ? 0 : it->second->load(std::memory_order_relaxed);
}

// The counters that are not zero, by name.
inline std::vector<std::string> counter_names() {
  auto& registry = detail::counters();
  std::scoped_lock lock(registry.mutex);
  std::vector<std::string> names;
  for (const auto& [name, value] : registry.counters) {
    if (value->load(std::memory_order_relaxed) != 0) names.push_back(name);
  }
  return names;
}

inline void clear_counters() {
  auto& registry = detail::counters();
  std::scoped_lock lock(registry.mutex);
  for (auto& [name, value] : registry.counters) value->store(0, std::memory_order_relaxed);
}

// ---- Metrics ----

// What a metric's values are; it decides only how they print.
// A fraction is a share from 0 to 1 (a utilization), printed to three significant digits.
enum class unit { nanoseconds, bytes, count, fraction };

inline const char* to_string(unit u) {
  switch (u) {
  case unit::nanoseconds:
    return "nanoseconds";
  case unit::bytes:
    return "bytes";
  case unit::count:
    return "count";
  case unit::fraction:
    return "fraction";
  }
  return "?";
}

// How many of a metric's latest samples are kept for rates and percentiles, as in
// PyTorch/XLA.
inline constexpr std::size_t recent_capacity = 1024;

struct sample {
  std::int64_t timestamp_ns; // steady_clock
  double value;
};

struct metric_snapshot {
  std::int64_t total_samples = 0; // since the last clear
  double accumulator = 0;         // the sum of those samples
  std::vector<sample> recent;     // the last recent_capacity of them, oldest first
  metrics::unit unit = metrics::unit::nanoseconds;
};

namespace detail {

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One metric's samples: a count, a sum and a ring of the latest ones.
class metric_data {
public:
  metric_data(std::string_view name, metrics::unit u) : name(name), unit(u) {
    ring_.reserve(recent_capacity); // so recording never allocates, and a timer's destructor cannot throw
  }

  const std::string name;
  const metrics::unit unit;

  void add(sample s) {
    std::scoped_lock lock(mutex_);
    ++total_;
    accumulator_ += s.value;
    if (ring_.size() < recent_capacity) {
      ring_.push_back(s);
    } else {
      ring_[oldest_] = s;
      oldest_ = (oldest_ + 1) % recent_capacity;
    }
  }

  std::int64_t total_samples() {
    std::scoped_lock lock(mutex_);
    return total_;
  }

  metric_snapshot snapshot() {
    std::scoped_lock lock(mutex_);
    metric_snapshot s{total_, accumulator_, {}, unit};
    s.recent.reserve(ring_.size());
    s.recent.insert(s.recent.end(), ring_.begin() + static_cast<std::ptrdiff_t>(oldest_), ring_.end());
    s.recent.insert(s.recent.end(), ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(oldest_));
    return s;
  }

  void clear() {
    std::scoped_lock lock(mutex_);
    total_ = 0;
    accumulator_ = 0;
    ring_.clear();
    oldest_ = 0;
  }

private:
  std::mutex mutex_;
  std::int64_t total_ = 0;
  double accumulator_ = 0;
  std::vector<sample> ring_;
  std::size_t oldest_ = 0; // where the next sample goes once the ring is full
};

struct metric_registry {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<metric_data>, std::less<>> metrics;

  metric_data& get(std::string_view name, metrics::unit u) {
    std::scoped_lock lock(mutex);
    auto it = metrics.find(name);
    if (it == metrics.end()) it = metrics.emplace(std::string(name), std::make_unique<metric_data>(name, u)).first;
    if (it->second->unit != u) {
      throw value_error(
          xlite::detail::message("metric '", name, "' records ", to_string(it->second->unit), ", not ", to_string(u)));
    }
    return *it->second;
  }
};

inline metric_registry& metrics() {
  static metric_registry registry;
  return registry;
}

} // namespace detail

// A metric by name, looked up once: keep one where recording is hot. Throws value_error
// when the metric already exists with another unit.
class metric {
public:
  explicit metric(std::string_view name, metrics::unit u = metrics::unit::nanoseconds)
      : data_(&detail::metrics().get(name, u)) {}

  void record(double value) const { data_->add({detail::now_ns(), value}); }
  void record(double value, std::int64_t timestamp_ns) const { data_->add({timestamp_ns, value}); }

  const std::string& name() const { return data_->name; }
  metrics::unit unit() const { return data_->unit; }

private:
  detail::metric_data* data_;
};

inline void record(std::string_view name, double value, unit u = unit::nanoseconds) { metric(name, u).record(value); }

// Records the steady_clock nanoseconds of its lifetime into a time metric:
// `metrics::timer t("CompileTime");`.
class timer {
public:
  explicit timer(std::string_view name) : timer(metric(name)) {}
  explicit timer(metric m) : metric_(m), start_ns_(detail::now_ns()) {
    if (m.unit() != unit::nanoseconds) {
      throw value_error(xlite::detail::message("metrics::timer: metric '", m.name(), "' records ", to_string(m.unit()),
                                               ", not nanoseconds"));
    }
  }
  timer(const timer&) = delete;
  timer& operator=(const timer&) = delete;

  ~timer() {
    const auto end_ns = detail::now_ns();
    metric_.record(static_cast<double>(end_ns - start_ns_), end_ns);
  }

private:
  metric metric_;
  std::int64_t start_ns_;
};

// The metrics that have samples, by name.
inline std::vector<std::string> metric_names() {
  auto& registry = detail::metrics();
  std::scoped_lock lock(registry.mutex);
  std::vector<std::string> names;
  for (const auto& [name, data] : registry.metrics) {
    if (data->total_samples() != 0) names.push_back(name);
  }
  return names;
}

// nullopt for a metric with no samples.
inline std::optional<metric_snapshot> metric_data(std::string_view name) {
  auto& registry = detail::metrics();
  std::scoped_lock lock(registry.mutex);
  const auto it = registry.metrics.find(name);
  if (it == registry.metrics.end()) return std::nullopt;
  auto snapshot = it->second->snapshot();
  if (snapshot.total_samples == 0) return std::nullopt;
  return snapshot;
}

inline void clear_metrics() {
  auto& registry = detail::metrics();
  std::scoped_lock lock(registry.mutex);
  for (auto& [name, data] : registry.metrics) data->clear();
}

inline void clear_all() {
  clear_counters();
  clear_metrics();
}

// ---- The report ----

namespace detail {

// Whole days, hours, minutes, seconds and milliseconds zero-padded, from the first that is
// not zero, then microseconds to the nanosecond, as PyTorch/XLA prints them:
// 0.500us, 001ms32.778us, 21s102ms853.173us, 06m09s401ms746.001us.
inline std::string format_time(double ns) {
  struct part {
    const char* suffix;
    std::int64_t ns;
    int width;
  };
  static constexpr part parts[] = {{"d", 86'400'000'000'000, 2},
                                   {"h", 3'600'000'000'000, 2},
                                   {"m", 60'000'000'000, 2},
                                   {"s", 1'000'000'000, 2},
                                   {"ms", 1'000'000, 3}};
  std::ostringstream out;
  out << std::setfill('0');
  if (ns < 0) out << '-';
  auto rest = static_cast<std::int64_t>(std::llround(std::abs(ns)));
  bool started = false;
  for (const auto& p : parts) {
    const auto whole = rest / p.ns;
    if (whole == 0 && !started) continue;
    out << std::setw(p.width) << whole << p.suffix;
    rest %= p.ns;
    started = true;
  }
  out << rest / 1000 << '.' << std::setw(3) << rest % 1000 << "us";
  return std::move(out).str();
}

// 512B, then two decimals in powers of 1024: 1.50KB, 1.50MB, ... PB.
inline std::string format_bytes(double bytes) {
  static constexpr const char* suffixes[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  std::size_t i = 0;
  for (; i + 1 < std::size(suffixes) && std::abs(bytes) >= 1024.0; ++i) bytes /= 1024.0;
  std::ostringstream out;
  out << std::fixed << std::setprecision(i == 0 ? 0 : 2) << bytes << suffixes[i];
  return std::move(out).str();
}

// Whole numbers as they are, others with two decimals.
inline std::string format_count(double value) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(value == std::floor(value) ? 0 : 2) << value;
  return std::move(out).str();
}

inline std::string format_fraction(double value) {
  std::ostringstream out;
  out << std::setprecision(3) << value;
  return std::move(out).str();
}

} // namespace detail

// A value as the report prints it in unit `u`.
inline std::string format(double value, unit u) {
  switch (u) {
  case unit::nanoseconds:
    return detail::format_time(value);
  case unit::bytes:
    return detail::format_bytes(value);
  case unit::count:
    return detail::format_count(value);
  case unit::fraction:
    return detail::format_fraction(value);
  }
  return {};
}

namespace detail {

// Nearest rank: the p% percentile of n samples is the ceil(p * n / 100)-th smallest, the
// smallest sample with at least p% of the samples at or below it.
inline void print_percentiles(std::ostream& out, std::vector<double> values, unit u) {
  static constexpr std::size_t percents[] = {1, 5, 10, 20, 50, 80, 90, 95, 99};
  std::sort(values.begin(), values.end());
  out << "  Percentiles: ";
  for (const auto p : percents) {
    const auto rank = (p * values.size() + 99) / 100;
    out << (p == percents[0] ? "" : "; ") << p << "%=" << format(values[rank - 1], u);
  }
  out << '\n';
}

// Rates are over the time the recent samples span; with one sample, or all at one
// instant, there is no span and the ValueRate and Rate lines are left out.
inline void print_metric(std::ostream& out, std::string_view name, const metric_snapshot& s) {
  out << "Metric: " << name << '\n';
  out << "  TotalSamples: " << s.total_samples << '\n';
  out << "  Accumulator: " << format(s.accumulator, s.unit) << '\n';
  std::vector<double> values;
  values.reserve(s.recent.size());
  for (const auto& r : s.recent) values.push_back(r.value);
  const auto [first, last] =
      std::minmax_element(s.recent.begin(), s.recent.end(),
                          [](const sample& a, const sample& b) { return a.timestamp_ns < b.timestamp_ns; });
  const double seconds = static_cast<double>(last->timestamp_ns - first->timestamp_ns) / 1e9;
  if (seconds > 0) {
    double sum = 0;
    for (const auto v : values) sum += v;
    out << "  ValueRate: " << format(sum / seconds, s.unit) << " / second\n";
    out << "  Rate: " << static_cast<double>(values.size()) / seconds << " / second\n";
  }
  print_percentiles(out, std::move(values), s.unit);
}

inline void print_counter(std::ostream& out, std::string_view name, std::int64_t value) {
  out << "Counter: " << name << '\n' << "  Value: " << value << '\n';
}

// Each device that has held a buffer: what its buffers take now and at their peak.
inline void print_memory(std::ostream& out) {
  for (std::int64_t d = 0; d < runtime::detail::max_devices; ++d) {
    const runtime::detail::device_memory& m = runtime::detail::memory_of(d);
    if (m.peak.load(std::memory_order_relaxed) == 0) continue;
    out << "Memory: cpu:" << d << '\n'
        << "  BytesUsed: " << format_bytes(static_cast<double>(m.used.load(std::memory_order_relaxed))) << '\n'
        << "  PeakBytesUsed: " << format_bytes(static_cast<double>(m.peak.load(std::memory_order_relaxed))) << '\n';
  }
}

} // namespace detail

// Every metric with samples, then every counter that is not zero, in PyTorch/XLA's format:
//   Metric: CompileTime
//     TotalSamples: 202
//     Accumulator: 06m09s401ms746.001us
//     ValueRate: 778ms572.062us / second
//     Rate: 0.425201 / second
//     Percentiles: 1%=001ms32.778us; 5%=001ms61.283us; ...; 99%=21s102ms853.173us
//   Counter: CachedCompile
//     Value: 395
inline std::string report() {
  std::ostringstream out;
  for (const auto& name : metric_names()) {
    if (const auto s = metric_data(name)) detail::print_metric(out, name, *s);
  }
  for (const auto& name : counter_names()) detail::print_counter(out, name, counter_value(name));
  detail::print_memory(out);
  return std::move(out).str();
}

// The named metrics, then the named counters, in the order given, leaving out those with
// no data; by default the ones PyTorch/XLA's short_metrics_report shows, and a tpu
// device's step cycles and MFU.
inline std::string
short_report(const std::vector<std::string>& counter_names = {"MarkStep", "CachedCompile", "UncachedCompile",
                                                              "PersistentCacheHit", "PersistentCacheMiss"},
             const std::vector<std::string>& metric_names = {"CompileTime", "ExecuteTime", "TransferToDeviceTime",
                                                             "TransferFromDeviceTime", "TpuStepCycles", "TpuMfu"}) {
  std::ostringstream out;
  for (const auto& name : metric_names) {
    if (const auto s = metric_data(name)) detail::print_metric(out, name, *s);
  }
  for (const auto& name : counter_names) {
    if (const auto value = counter_value(name); value != 0) detail::print_counter(out, name, value);
  }
  return std::move(out).str();
}

namespace detail {

// The file XLITE_METRICS_FILE names, read and opened for appending once, on first use.
class step_report_file {
public:
  step_report_file() {
    const auto path = env_string("XLITE_METRICS_FILE");
    if (!path) return;
    path_ = *path;
    file_.open(path_, std::ios::app);
    if (!file_.is_open()) warn("cannot be opened for appending");
  }

  void write() {
    std::scoped_lock lock(mutex_);
    if (!file_.is_open() || file_.fail()) return; // unset, or warned about already
    file_ << "=== xlite metrics report, step " << ++steps_ << " ===\n" << report() << std::flush;
    if (file_.fail()) warn("cannot be written");
  }

private:
  void warn(const char* what) const {
    std::cerr << "xlite: warning: the metrics file '" << path_ << "' (XLITE_METRICS_FILE) " << what
              << "; no metrics reports will be written to it\n";
  }

  std::mutex mutex_;
  std::string path_;
  std::ofstream file_;
  std::int64_t steps_ = 0;
};

} // namespace detail

// Appends a header naming the step (the count of calls) and report() to the file
// XLITE_METRICS_FILE names, if it is set. It is meant to run in every mark_step, so it
// never throws: a file that cannot be opened or written gets one warning on std::cerr and
// is not tried again.
inline void write_step_report() noexcept {
  try {
    static detail::step_report_file file;
    file.write();
  } catch (const std::exception& e) { // only out of memory or a broken mutex: drop this step's report
    std::cerr << "xlite: warning: the metrics report was not written: " << e.what() << '\n';
  }
}

} // namespace xlite::metrics
