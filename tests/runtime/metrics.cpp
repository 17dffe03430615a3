#include <xlite/runtime/metrics.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <latch>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace metrics = xlite::metrics;
using Catch::Matchers::Contains;
using metrics::unit;

namespace {

// The Percentiles line for the values at 1%, 5%, 10%, 20%, 50%, 80%, 90%, 95%, 99%.
std::string percentiles(const std::vector<std::string>& values) {
  static const char* const percents[] = {"1", "5", "10", "20", "50", "80", "90", "95", "99"};
  REQUIRE(values.size() == std::size(percents));
  std::string line = "  Percentiles: ";
  for (std::size_t i = 0; i < values.size(); ++i) line += (i ? "; " : "") + std::string(percents[i]) + "%=" + values[i];
  return line + "\n";
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

// Captures what is written to std::cerr while it lives.
class capture_cerr {
public:
  capture_cerr() : saved_(std::cerr.rdbuf(text_.rdbuf())) {}
  ~capture_cerr() { std::cerr.rdbuf(saved_); }
  std::string text() const { return text_.str(); }

private:
  std::ostringstream text_;
  std::streambuf* saved_;
};

} // namespace

TEST_CASE("counters: created on first use, listed while not zero, cleared", "[metrics]") {
  metrics::clear_all();
  CHECK(metrics::counter_value("TestNever") == 0);
  metrics::increment("TestB");
  metrics::increment("TestB", 4);
  auto& a = metrics::counter("TestA");
  a.fetch_add(2);
  CHECK(metrics::counter_value("TestA") == 2);
  CHECK(metrics::counter_value("TestB") == 5);
  CHECK(metrics::counter_names() == std::vector<std::string>{"TestA", "TestB"});

  metrics::clear_counters();
  CHECK(metrics::counter_value("TestB") == 0);
  CHECK(metrics::counter_names().empty());
  a.fetch_add(1); // a reference taken before the clear still counts
  CHECK(metrics::counter_value("TestA") == 1);
}

TEST_CASE("metric_data: total and accumulator of every sample, the last 1024 kept in order", "[metrics]") {
  metrics::clear_all();
  CHECK_FALSE(metrics::metric_data("TestSeries"));
  const metrics::metric series("TestSeries", unit::count);
  for (int i = 0; i < 1030; ++i) series.record(i, 1000 + i);

  const auto data = metrics::metric_data("TestSeries");
  REQUIRE(data);
  CHECK(data->total_samples == 1030);
  CHECK(data->accumulator == 1029.0 * 1030.0 / 2.0);
  CHECK(data->unit == unit::count);
  REQUIRE(data->recent.size() == metrics::recent_capacity);
  for (std::size_t i = 0; i < data->recent.size(); ++i) {
    INFO("recent sample " << i);
    CHECK(data->recent[i].value == static_cast<double>(6 + i));
    CHECK(data->recent[i].timestamp_ns == static_cast<std::int64_t>(1006 + i));
  }
  CHECK(metrics::metric_names() == std::vector<std::string>{"TestSeries"});
}

TEST_CASE("metrics: a name keeps its first unit", "[metrics]") {
  metrics::record("TestBytes", 10, unit::bytes);
  CHECK_THROWS_AS(metrics::record("TestBytes", 10), xlite::value_error);
  CHECK_THROWS_WITH(metrics::record("TestBytes", 10),
                    Contains("'TestBytes'") && Contains("bytes") && Contains("nanoseconds"));
  CHECK_THROWS_WITH(metrics::timer(metrics::metric("TestBytes", unit::bytes)),
                    Contains("'TestBytes'") && Contains("bytes"));
}

TEST_CASE("format: times as PyTorch/XLA prints them", "[metrics]") {
  CHECK(metrics::format(0, unit::nanoseconds) == "0.000us");
  CHECK(metrics::format(500, unit::nanoseconds) == "0.500us");
  CHECK(metrics::format(1.4, unit::nanoseconds) == "0.001us");
  CHECK(metrics::format(32'778, unit::nanoseconds) == "32.778us");
  CHECK(metrics::format(1'032'778, unit::nanoseconds) == "001ms32.778us");
  CHECK(metrics::format(110'973'000, unit::nanoseconds) == "110ms973.000us");
  CHECK(metrics::format(1e9, unit::nanoseconds) == "01s000ms0.000us");
  CHECK(metrics::format(21'102'853'173, unit::nanoseconds) == "21s102ms853.173us");
  CHECK(metrics::format(369'401'746'001, unit::nanoseconds) == "06m09s401ms746.001us");
  CHECK(metrics::format(3'600e9 + 5'001, unit::nanoseconds) == "01h00m00s000ms5.001us");
  CHECK(metrics::format(90'061e9, unit::nanoseconds) == "01d01h01m01s000ms0.000us");
}

TEST_CASE("format: bytes in powers of 1024, counts as plain numbers, fractions to 3 digits", "[metrics]") {
  CHECK(metrics::format(0, unit::bytes) == "0B");
  CHECK(metrics::format(512, unit::bytes) == "512B");
  CHECK(metrics::format(1023, unit::bytes) == "1023B");
  CHECK(metrics::format(1536, unit::bytes) == "1.50KB");
  CHECK(metrics::format(1.5 * 1024 * 1024, unit::bytes) == "1.50MB");
  CHECK(metrics::format(2.0 * 1024 * 1024 * 1024, unit::bytes) == "2.00GB");
  CHECK(metrics::format(395, unit::count) == "395");
  CHECK(metrics::format(2.5, unit::count) == "2.50");
  CHECK(metrics::format(0.0142684, unit::fraction) == "0.0143");
  CHECK(metrics::format(0.5, unit::fraction) == "0.5");
}

TEST_CASE("report: percentiles are nearest-rank over the recent samples", "[metrics]") {
  metrics::clear_all();
  const metrics::metric ten("TestTen", unit::count);
  for (const double v : {7, 3, 10, 1, 9, 2, 8, 5, 4, 6}) ten.record(v, 0);
  // The p% percentile of n samples is the ceil(p * n / 100)-th smallest.
  CHECK_THAT(metrics::report(), Contains(percentiles({"1", "1", "1", "2", "5", "8", "9", "10", "10"})));

  metrics::clear_all();
  const metrics::metric many("TestMany", unit::count);
  for (int v = 200; v >= 1; --v) many.record(v, 0);
  CHECK_THAT(metrics::report(), Contains(percentiles({"2", "10", "20", "40", "100", "160", "180", "190", "198"})));

  metrics::clear_all();
  for (int v = 1; v <= 2000; ++v) many.record(v, 0); // only 977..2000 are recent
  CHECK_THAT(metrics::report(),
             Contains(percentiles({"987", "1028", "1079", "1181", "1488", "1796", "1898", "1949", "1990"})));
}

TEST_CASE("report: every metric, then every counter that is not zero", "[metrics]") {
  metrics::clear_all();
  const metrics::metric compile("CompileTime");
  compile.record(1e6, 0);
  compile.record(2e6, 1'000'000'000);
  compile.record(3e6, 2'000'000'000);
  metrics::record("TransferToDeviceBytes", 1.5 * 1024 * 1024, unit::bytes);
  metrics::increment("MarkStep", 2);
  metrics::increment("CachedCompile", 395);
  metrics::counter("UncachedCompile"); // zero: left out

  const std::string expected =
      "Metric: CompileTime\n"
      "  TotalSamples: 3\n"
      "  Accumulator: 006ms0.000us\n"
      "  ValueRate: 003ms0.000us / second\n" // 6 ms over 2 s
      "  Rate: 1.5 / second\n" +
      percentiles({"001ms0.000us", "001ms0.000us", "001ms0.000us", "001ms0.000us", "002ms0.000us", "003ms0.000us",
                   "003ms0.000us", "003ms0.000us", "003ms0.000us"}) +
      "Metric: TransferToDeviceBytes\n"
      "  TotalSamples: 1\n"
      "  Accumulator: 1.50MB\n" + // one sample: no span, no rates
      percentiles(std::vector<std::string>(9, "1.50MB")) +
      "Counter: CachedCompile\n"
      "  Value: 395\n"
      "Counter: MarkStep\n"
      "  Value: 2\n";
  CHECK(metrics::report() == expected);
}

TEST_CASE("short_report: the named metrics and counters in the order given, those with data", "[metrics]") {
  metrics::clear_all();
  metrics::record("ExecuteTime", 2000, unit::nanoseconds);
  metrics::record("CompileTime", 1000, unit::nanoseconds);
  metrics::record("TestOtherTime", 3000);
  metrics::increment("CachedCompile");
  metrics::increment("MarkStep");
  metrics::increment("TestOther");
  metrics::counter("UncachedCompile"); // zero: left out

  const auto report = metrics::short_report();
  const auto at = [&](const char* text) { return report.find(text); };
  CHECK(at("Metric: CompileTime\n") < at("Metric: ExecuteTime\n"));
  CHECK(at("Metric: ExecuteTime\n") < at("Counter: MarkStep\n"));
  CHECK(at("Counter: MarkStep\n") < at("Counter: CachedCompile\n"));
  CHECK(at("Counter: CachedCompile\n") != std::string::npos);
  for (const char* absent : {"TransferToDeviceTime", "UncachedCompile", "PersistentCache", "TestOther"}) {
    INFO(absent);
    CHECK(at(absent) == std::string::npos);
  }

  CHECK(metrics::short_report({"TestOther"}, {"TestOtherTime"}) ==
        "Metric: TestOtherTime\n  TotalSamples: 1\n  Accumulator: 3.000us\n" +
            percentiles(std::vector<std::string>(9, "3.000us")) + "Counter: TestOther\n  Value: 1\n");
  CHECK(metrics::short_report({}, {}).empty());
}

TEST_CASE("clear_all: no metric or counter is left, and handles keep working", "[metrics]") {
  const metrics::metric handle("TestCleared", unit::count);
  handle.record(5);
  metrics::increment("TestClearedCount");
  REQUIRE_FALSE(metrics::report().empty());

  metrics::clear_all();
  CHECK(metrics::report().empty());
  CHECK(metrics::metric_names().empty());
  CHECK(metrics::counter_names().empty());
  CHECK_FALSE(metrics::metric_data("TestCleared"));

  handle.record(7);
  const auto data = metrics::metric_data("TestCleared");
  REQUIRE(data);
  CHECK(data->total_samples == 1);
  CHECK(data->accumulator == 7);
  REQUIRE(data->recent.size() == 1);
  CHECK(data->recent[0].value == 7);
}

TEST_CASE("timer: records the nanoseconds it lived", "[metrics]") {
  metrics::clear_all();
  const auto before = std::chrono::steady_clock::now();
  {
    metrics::timer t("TestTimer");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const auto outside = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - before).count();
  const auto data = metrics::metric_data("TestTimer");
  REQUIRE(data);
  CHECK(data->unit == unit::nanoseconds);
  CHECK(data->total_samples == 1);
  CHECK(data->accumulator >= 2e6);
  CHECK(data->accumulator <= outside);
}

TEST_CASE("metrics: recording from several threads loses no sample", "[metrics]") {
  metrics::clear_all();
  constexpr int threads = 4;
  constexpr int per_thread = 100'000;
  std::atomic<bool> done = false;
  std::thread reader([&] {
    while (!done) (void)metrics::report(); // reads while the others record
  });
  std::latch start(threads); // so the writers overlap
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; ++t) {
    writers.emplace_back([t, &start] {
      const metrics::metric handle("TestShared", unit::count);
      start.arrive_and_wait();
      for (int i = 0; i < per_thread; ++i) {
        if (i % 16 != 0)
          handle.record(t + 1);
        else
          metrics::record("TestShared", t + 1, unit::count); // by name, now and then
        metrics::increment("TestSharedCount");
      }
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  reader.join();

  const auto data = metrics::metric_data("TestShared");
  REQUIRE(data);
  CHECK(data->total_samples == threads * per_thread);
  CHECK(data->accumulator == per_thread * (1.0 + 2 + 3 + 4));
  CHECK(data->recent.size() == metrics::recent_capacity);
  CHECK(metrics::counter_value("TestSharedCount") == threads * per_thread);
}

// Run by CTest with XLITE_METRICS_FILE set to a file under the build directory.
TEST_CASE("write_step_report: appends a headed report per call to XLITE_METRICS_FILE", "[.xlite_metrics_file]") {
  const char* path = std::getenv("XLITE_METRICS_FILE");
  REQUIRE(path != nullptr);
  std::filesystem::remove(path); // the file is opened on the first call, below
  metrics::clear_all();

  capture_cerr warnings;
  metrics::increment("MarkStep");
  metrics::write_step_report();
  metrics::increment("MarkStep");
  metrics::write_step_report();
  CHECK(read_file(path) == "=== xlite metrics report, step 1 ===\n"
                           "Counter: MarkStep\n  Value: 1\n"
                           "=== xlite metrics report, step 2 ===\n"
                           "Counter: MarkStep\n  Value: 2\n");
  CHECK(warnings.text().empty());
}

// Run by CTest with XLITE_METRICS_FILE set to a path under a regular file.
TEST_CASE("write_step_report: a file that cannot be opened warns once and never throws",
          "[.xlite_metrics_file_unopenable]") {
  const char* path = std::getenv("XLITE_METRICS_FILE");
  REQUIRE(path != nullptr);
  const auto parent = std::filesystem::path(path).parent_path();
  std::filesystem::remove_all(parent);
  std::ofstream(parent) << "a regular file, so nothing can be created under it\n";

  capture_cerr warnings;
  metrics::increment("MarkStep");
  CHECK_NOTHROW(metrics::write_step_report());
  CHECK_NOTHROW(metrics::write_step_report());
  const auto text = warnings.text();
  CHECK_THAT(text, Contains(path) && Contains("XLITE_METRICS_FILE"));
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);
  CHECK_FALSE(std::filesystem::exists(path));
}
