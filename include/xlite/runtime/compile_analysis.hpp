#pragma once

// Why did it compile? XLITE_DEBUG_LEVEL (PT_XLA_DEBUG_LEVEL's counterpart) prints, on
// std::cerr, an analysis of every compilation: its cause (mark_step, a transfer to the host
// ...), the line of the user's program that triggered it, the graph's hash, inputs and
// outputs. When one line of the program compiles again, the analysis says what differs
// from the graph compiled there before: which input changed its shape, from what to what,
// or which op or attribute. Level 2 also reports every execution, compiled or not.

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "xlite/core/env.hpp"
#include "xlite/core/source_location.hpp"
#include "xlite/ir/diff.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/runtime/device.hpp"
#include "xlite/runtime/metrics.hpp"

namespace xlite::debug {

// What made a graph run, and where in the user's program.
struct step_cause {
  std::string_view reason; // "mark_step", "to_host", "item", ...
  source_location where;
  xlite::device device{}; // one barrier compiles a graph per device
};

namespace detail {

inline std::atomic<int>& level() {
  static std::atomic<int> value = static_cast<int>(env_integer("XLITE_DEBUG_LEVEL", 0, 2).value_or(0));
  return value;
}

// The graph last compiled at each line of the user's program, for each device.
struct compile_history {
  struct place {
    ir::graph last;
    int compiles = 0;
  };
  std::mutex mutex;
  std::map<std::string, place> places;
};

inline compile_history& history() {
  static compile_history h;
  return h;
}

inline std::string hex(std::uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

inline std::string location(const xlite::source_location& where) {
  return std::string(where.file_name()) + ":" + std::to_string(where.line());
}

inline void print_analysis(std::ostream& out, std::string_view title, const ir::graph& g, std::uint64_t hash,
                           const step_cause& cause, std::string_view diagnosis) {
  const std::string prefix = std::string(title) + ": ";
  out << prefix << std::string(80, '=') << '\n';
  out << prefix << title.substr(0, title.find(' ')) << " Cause\n" << prefix << "  " << cause.reason << '\n';
  out << prefix << "Graph Info:\n";
  out << prefix << "  Graph Hash: " << hex(hash) << '\n';
  out << prefix << "  Device: " << cause.device << '\n';
  const auto list = [&](const auto& values) {
    for (std::size_t k = 0; k < values.size(); ++k) out << (k ? ", " : " ") << ir::type_text(*values[k]);
    out << '\n';
  };
  std::vector<const ir::instruction*> outputs;
  for (const ir::value_id v : g.outputs) outputs.push_back(&g.instructions[v]);
  out << prefix << "  Number of Graph Inputs: " << g.parameter_count << '\n';
  out << prefix << "  Inputs:";
  list(ir::parameters_by_position(g));
  out << prefix << "  Number of Graph Outputs: " << g.outputs.size() << '\n';
  out << prefix << "  Outputs:";
  list(outputs);
  out << prefix << "Triggered at:\n";
  out << prefix << "  " << cause.reason << " (" << location(cause.where) << ", in " << cause.where.function_name()
      << ")\n";
  if (!diagnosis.empty()) {
    out << prefix << "Recompilation Diagnosis:\n";
    std::string_view rest = diagnosis;
    while (!rest.empty()) {
      const auto end = rest.find('\n');
      out << prefix << "  " << rest.substr(0, end) << '\n';
      rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    }
  }
  out << prefix << std::string(80, '-') << '\n';
}

} // namespace detail

// 0 (off), 1 (compilations) or 2 (also executions); XLITE_DEBUG_LEVEL sets the start value.
inline int debug_level() { return detail::level().load(std::memory_order_relaxed); }
inline void set_debug_level(int level) {
  if (level < 0 || level > 2) throw value_error(xlite::detail::message("set_debug_level: ", level, " is not 0, 1 or 2"));
  detail::level().store(level, std::memory_order_relaxed);
}

// Forgets the graphs compiled so far, so the next compilation at a line is not compared
// with an older one (for tests, or a program that changes phase on purpose).
inline void clear_compile_history() {
  auto& h = detail::history();
  std::scoped_lock lock(h.mutex);
  h.places.clear();
}

// Called for each graph the compiler compiles (not for cache hits).
inline void analyse_compilation(const ir::graph& g, std::uint64_t hash, const step_cause& cause) {
  if (debug_level() < 1) return;
  std::string diagnosis;
  {
    auto& h = detail::history();
    std::scoped_lock lock(h.mutex);
    auto& place = h.places[detail::location(cause.where) + " on " + cause.device.to_string()];
    if (place.compiles > 0) {
      const auto difference = ir::describe_difference(place.last, g);
      diagnosis = "compilation " + std::to_string(place.compiles + 1) +
                  " at this line; the graph differs from the one compiled here before:\n" +
                  difference.value_or("(it equals it: the earlier executable was evicted from the cache)\n");
    }
    ++place.compiles;
    place.last = g;
  }
  detail::print_analysis(std::cerr, "Compilation Analysis", g, hash, cause, diagnosis);
}

// Called at the end of each mark_step: PyTorch/XLA's auto-metrics analysis. A program that
// compiles in more than half its steps, or copies to the host in nine of ten, is told so at
// steps 10, 20, 40, ..., with where to look. Counts are since metrics::clear_counters().
inline void analyse_step() {
  if (debug_level() < 1) return;
  const std::int64_t steps = metrics::counter_value("MarkStep");
  const bool report_now = steps >= 10 && steps % 10 == 0 && std::has_single_bit(static_cast<std::uint64_t>(steps / 10));
  if (!report_now) return;
  const std::int64_t compilations = metrics::counter_value("UncachedCompile");
  const std::int64_t transfers = metrics::counter_value("TransferFromDevice");
  if (2 * compilations > steps) {
    std::cerr << "xlite: CompileTime too frequent: " << compilations << " counts during " << steps
              << " steps; the Recompilation Diagnosis of each says what changed\n";
  }
  if (10 * transfers >= 9 * steps) {
    std::cerr << "xlite: TransferFromDeviceTime too frequent: " << transfers << " counts during " << steps
              << " steps; each to_host or item before mark_step cuts the graph and waits for the device\n";
  }
}

// Called for each graph run, compiled or found in a cache.
inline void analyse_execution(const ir::graph& g, std::uint64_t hash, const step_cause& cause) {
  if (debug_level() >= 2) detail::print_analysis(std::cerr, "Execution Analysis", g, hash, cause, {});
}

} // namespace xlite::debug
