// The persistent compilation cache: a second process compiles nothing; damaged, foreign and
// unwritable caches, read-only mode, concurrent writers and the size bound all leave the
// program computing the right values.

#include <catch2/catch.hpp>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cache_program.hpp"
#include "capture_stderr.hpp"
#include "xlite/lazy.hpp"

using namespace xlite;
using xlite_test::captured_errors;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system's temporary one, removed when the test ends.
struct scratch_directory {
  fs::path path;
  scratch_directory() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() /
           ("xlite-cache-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path);
  }
  ~scratch_directory() {
    std::error_code ignored;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(path, ignored);
  }
};

std::set<fs::path> entries_in(const fs::path& dir) {
  std::set<fs::path> found;
  std::error_code ignored;
  for (const auto& item : fs::directory_iterator(dir, ignored)) found.insert(item.path());
  return found;
}

// What a cache_child process reported: its counters and the program's values as bits.
struct child_report {
  std::map<std::string, std::int64_t> counters;
  std::vector<std::uint32_t> values;
};

pid_t spawn_child(const fs::path& cache, const fs::path& output, bool readonly) {
  std::vector<std::string> args{XLITE_CACHE_CHILD, cache.string(), output.string()};
  if (readonly) args.emplace_back("readonly");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, XLITE_CACHE_CHILD, nullptr, nullptr, argv.data(), environ) == 0);
  return pid;
}

child_report wait_child(pid_t pid, const fs::path& output) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  child_report report;
  std::ifstream in(output);
  for (int k = 0; k < 4; ++k) {
    std::string name;
    std::int64_t value = 0;
    in >> name >> value;
    report.counters[name] = value;
  }
  for (std::uint32_t bits = 0; in >> bits;) report.values.push_back(bits);
  return report;
}

child_report run_child(const fs::path& cache, const fs::path& output, bool readonly = false) {
  return wait_child(spawn_child(cache, output, readonly), output);
}

std::vector<std::uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<std::uint32_t> bits;
  for (const float v : values) bits.push_back(std::bit_cast<std::uint32_t>(v));
  return bits;
}

// The program's values compiled in this process, with no persistent cache.
const std::vector<std::uint32_t>& reference_values() {
  static const std::vector<std::uint32_t> values = [] {
    runtime::disable_persistent_cache();
    runtime::clear_compilation_cache();
    return bits_of(xlite_test::run_cache_program());
  }();
  return values;
}

// Runs the program as a new process would: nothing in memory, counters from zero.
std::vector<std::uint32_t> run_fresh(std::int64_t batch = 16) {
  runtime::clear_compilation_cache();
  metrics::clear_counters();
  return bits_of(xlite_test::run_cache_program(batch));
}

// What the program writes on std::cerr while `body` runs.

std::int64_t count(const char* name) { return metrics::counter_value(name); }

// A persistent cache in `directory` for one test: later tests run without one even when a
// check fails half-way.
struct persistent_cache_scope {
  explicit persistent_cache_scope(const fs::path& directory, bool readonly = false,
                                  std::uintmax_t max_bytes = compile::disk_cache::default_max_bytes) {
    runtime::initialize_cache(directory, readonly, max_bytes);
  }
  ~persistent_cache_scope() { runtime::disable_persistent_cache(); }
};

} // namespace

TEST_CASE("a second process sharing the cache directory compiles nothing and computes the same bits", "[cache]") {
  const auto& expected = reference_values();
  scratch_directory dir;
  const fs::path output = dir.path.string() + ".out";
  const child_report first = run_child(dir.path, output);
  CHECK(first.counters.at("UncachedCompile") > 0);
  CHECK(first.counters.at("PersistentCacheMiss") == first.counters.at("UncachedCompile"));
  CHECK(first.counters.at("PersistentCacheHit") == 0);
  CHECK(first.values == expected);
  CHECK(entries_in(dir.path).size() == static_cast<std::size_t>(first.counters.at("UncachedCompile")));

  const child_report second = run_child(dir.path, output);
  CHECK(second.counters.at("UncachedCompile") == 0);
  CHECK(second.counters.at("PersistentCacheHit") == first.counters.at("UncachedCompile"));
  CHECK(second.counters.at("PersistentCacheMiss") == 0);
  CHECK(second.values == expected);
  fs::remove(output);
}

TEST_CASE("processes storing the same entries at once leave whole entries", "[cache]") {
  const auto& expected = reference_values();
  for (int round = 0; round < 3; ++round) {
    scratch_directory dir;
    std::vector<fs::path> outputs;
    std::vector<pid_t> children;
    for (int k = 0; k < 3; ++k) {
      outputs.push_back(dir.path.string() + ".out" + std::to_string(k));
      children.push_back(spawn_child(dir.path, outputs.back(), false));
    }
    for (int k = 0; k < 3; ++k) CHECK(wait_child(children[k], outputs[k]).values == expected);
    // No temporary file is left behind, and every entry is whole: a new process hits them all.
    for (const auto& entry : entries_in(dir.path)) CHECK(entry.extension() == ".xlc");
    const child_report after = run_child(dir.path, outputs[0]);
    CHECK(after.counters.at("UncachedCompile") == 0);
    CHECK(after.counters.at("PersistentCacheBadEntry") == 0);
    CHECK(after.values == expected);
    for (const auto& output : outputs) fs::remove(output);
  }
}

TEST_CASE("a read-only cache is used but never written", "[cache]") {
  const auto& expected = reference_values();
  scratch_directory dir;
  const fs::path output = dir.path.string() + ".out";
  SECTION("an empty one: everything compiles, nothing is stored") {
    fs::create_directories(dir.path);
    const child_report report = run_child(dir.path, output, true);
    CHECK(report.counters.at("UncachedCompile") > 0);
    CHECK(report.values == expected);
    CHECK(entries_in(dir.path).empty());
  }
  SECTION("a filled one: everything hits, no file changes") {
    run_child(dir.path, output);
    const auto before = entries_in(dir.path);
    std::map<fs::path, fs::file_time_type> times;
    for (const auto& e : before) times[e] = fs::last_write_time(e);
    const child_report report = run_child(dir.path, output, true);
    CHECK(report.counters.at("UncachedCompile") == 0);
    CHECK(report.values == expected);
    CHECK(entries_in(dir.path) == before);
    for (const auto& e : before) CHECK(fs::last_write_time(e) == times[e]);
  }
  fs::remove(output);
}

TEST_CASE("damaged entries are reported once, recompiled and replaced", "[cache]") {
  const auto& expected = reference_values();
  scratch_directory dir;
  const persistent_cache_scope cache(dir.path);
  REQUIRE(run_fresh() == expected);
  const auto entries = entries_in(dir.path);
  const auto n = static_cast<std::int64_t>(entries.size());
  REQUIRE(n > 0);

  struct damage {
    const char* name;
    void (*apply)(std::string& bytes);
  };
  const damage kinds[] = {
      {"truncated to half", [](std::string& b) { b.resize(b.size() / 2); }},
      {"shorter than its header", [](std::string& b) { b.resize(10); }},
      {"empty", [](std::string& b) { b.clear(); }},
      {"a flipped payload byte", [](std::string& b) { b[b.size() - 5] ^= 0x10; }},
      {"a flipped checksum byte", [](std::string& b) { b[27] ^= 0x01; }},
      {"a longer payload than its header says", [](std::string& b) { b += "more"; }},
      {"another format version", [](std::string& b) { b[8] = 2; }},
      {"not an entry at all", [](std::string& b) { b = std::string(b.size(), 'x'); }},
  };
  for (const damage& kind : kinds) {
    INFO("entries " << kind.name);
    for (const auto& path : entries) {
      std::ifstream in(path, std::ios::binary);
      std::string bytes{std::istreambuf_iterator<char>(in), {}};
      in.close();
      kind.apply(bytes);
      std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    }
    // A new disk_cache, as in a new process, so each kind is warned about afresh.
    runtime::initialize_cache(dir.path);
    std::vector<std::uint32_t> values;
    const std::string warnings = captured_errors([&] { values = run_fresh(); });
    CHECK(values == expected);
    CHECK(count("PersistentCacheBadEntry") == n);
    CHECK(count("UncachedCompile") == n);
    for (const auto& path : entries) {
      const auto first = warnings.find(path.string());
      CHECK(first != std::string::npos);
      CHECK(warnings.find(path.string(), first + 1) == std::string::npos); // once
    }
    // Replaced: the next run hits every entry.
    CHECK(run_fresh() == expected);
    CHECK(count("PersistentCacheHit") == n);
    CHECK(count("UncachedCompile") == 0);
  }
}

TEST_CASE("a cache directory that cannot be written is warned about and the program runs", "[cache]") {
  const auto& expected = reference_values();
  scratch_directory dir;
  fs::create_directories(dir.path);
  std::ofstream(dir.path / "a file") << "not a directory";
  std::vector<std::uint32_t> values;
  std::optional<persistent_cache_scope> cache;
  const std::string warnings = captured_errors([&] {
    cache.emplace(dir.path / "a file" / "cache");
    values = run_fresh();
    values = run_fresh();
  });
  CHECK(values == expected);
  CHECK(count("UncachedCompile") > 0);
  CHECK(warnings.find("cannot write to the compilation cache") != std::string::npos);
  CHECK(warnings.find("cannot write", warnings.find("cannot write") + 1) == std::string::npos); // once

  if (::geteuid() != 0) { // root writes anyway
    const fs::path locked = dir.path / "locked";
    fs::create_directories(locked);
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    const std::string locked_warnings = captured_errors([&] {
      runtime::initialize_cache(locked); // still ended by `cache`
      values = run_fresh();
    });
    CHECK(values == expected);
    CHECK(locked_warnings.find("cannot write") != std::string::npos);
    CHECK(entries_in(locked).empty());
  }
}

TEST_CASE("a cache over its size bound evicts the entries used least recently", "[cache]") {
  scratch_directory dir;
  std::set<fs::path> first_entries;
  std::uintmax_t entry_bytes = 0;
  {
    const persistent_cache_scope unbounded(dir.path);
    run_fresh(1);
    first_entries = entries_in(dir.path);
    for (const auto& e : first_entries) entry_bytes = std::max(entry_bytes, fs::file_size(e));
  }
  fs::remove_all(dir.path);

  // Room for batch 1's entries and two more; each batch size below adds as many as batch 1.
  const std::uintmax_t bound = (first_entries.size() + 2) * entry_bytes;
  const auto total_bytes = [&] {
    std::uintmax_t total = 0;
    for (const auto& e : entries_in(dir.path)) total += fs::file_size(e);
    return total;
  };
  const persistent_cache_scope bounded(dir.path, false, bound);
  run_fresh(1);
  const auto kept = entries_in(dir.path);
  for (std::int64_t batch = 2; batch <= 5; ++batch) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // file times are coarse
    run_fresh(1); // using batch 1's entries keeps them recent
    CHECK(count("PersistentCacheHit") == static_cast<std::int64_t>(kept.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    run_fresh(batch);
    CHECK(total_bytes() <= bound);
  }
  for (const auto& e : kept) CHECK(fs::exists(e));
  CHECK(entries_in(dir.path).size() < 5 * kept.size()); // older batches' entries were evicted
}

TEST_CASE("initialize_cache refuses an empty path and a zero bound", "[cache]") {
  CHECK_THROWS_AS(runtime::initialize_cache(""), value_error);
  CHECK_THROWS_AS(runtime::initialize_cache("somewhere", false, 0), value_error);
  CHECK_THROWS_AS(runtime::set_compilation_cache_capacity(0), value_error);
}

TEST_CASE("the in-memory cache's capacity is settable and evicts the least recently used", "[cache]") {
  runtime::disable_persistent_cache();
  const std::size_t before = runtime::compilation_cache_capacity();
  runtime::set_compilation_cache_capacity(1);
  CHECK(runtime::compilation_cache_capacity() == 1);
  run_fresh(1);
  const auto graphs_per_run = count("UncachedCompile");
  REQUIRE(graphs_per_run >= 2);
  metrics::clear_counters();
  xlite_test::run_cache_program(1); // too many graphs for 1 slot: they evict each other
  CHECK(count("UncachedCompile") == graphs_per_run);
  runtime::set_compilation_cache_capacity(before);
  xlite_test::run_cache_program(1);
  metrics::clear_counters();
  xlite_test::run_cache_program(1); // now they all fit
  CHECK(count("UncachedCompile") == 0);
}

// Run by CTest with XLITE_CACHE_DIR set.
TEST_CASE("XLITE_CACHE_DIR sets up the persistent cache on first use", "[.xlite_cache_dir]") {
  const fs::path dir = std::getenv("XLITE_CACHE_DIR");
  fs::remove_all(dir);
  const auto first = run_fresh();
  CHECK(count("PersistentCacheMiss") == count("UncachedCompile"));
  CHECK(entries_in(dir).size() == static_cast<std::size_t>(count("UncachedCompile")));
  const auto entries = static_cast<std::int64_t>(entries_in(dir).size());
  CHECK(run_fresh() == first);
  CHECK(count("PersistentCacheHit") == entries);
  CHECK(count("UncachedCompile") == 0);
  fs::remove_all(dir);
}

TEST_CASE("a graph with a NaN constant hits the cache like any other", "[cache]") {
  runtime::clear_compilation_cache();
  metrics::clear_counters();
  const auto x = lazy::tensor::from(xlite::tensor<float>({1.0f, 2.0f}));
  for (int step = 0; step < 3; ++step) {
    const float shift = static_cast<float>(step + 2); // not 0 or 1, which are graph constants
    const auto padded = lazy::pad(x + shift, {{1, 1}}, std::numeric_limits<float>::quiet_NaN());
    mark_step();
    const auto values = padded.to_host<float>();
    CHECK(std::isnan(values(0)));
    CHECK(values(1) == 1.0f + shift);
  }
  CHECK(count("UncachedCompile") == 1);
}
