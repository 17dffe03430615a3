#pragma once

// XLITE_SAVE_TENSORS_FILE: append every graph that runs to a file, as PyTorch/XLA's
// XLA_SAVE_TENSORS_FILE does, in the format XLITE_SAVE_TENSORS_FMT names: text (the
// default; ir/print.hpp) or dot (Graphviz; ir/dot.hpp). Each graph follows a line starting
// with '#' that says which run it is, its hash and what triggered it; Graphviz skips such
// lines, so `dot -Tsvg` reads the file as it is. The file is only appended to: remove it
// for a clean sheet.

#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "xlite/core/call_stack.hpp"
#include "xlite/core/env.hpp"
#include "xlite/ir/dot.hpp"
#include "xlite/ir/print.hpp"
#include "xlite/runtime/compile_analysis.hpp"

namespace xlite::debug {

namespace detail {

struct graph_dump_settings {
  std::optional<std::string> path;
  bool dot = false;
};

inline graph_dump_settings read_graph_dump_settings() {
  graph_dump_settings settings{env_string("XLITE_SAVE_TENSORS_FILE"), false};
  const std::string format = env_string("XLITE_SAVE_TENSORS_FMT").value_or("text");
  if (format != "text" && format != "dot") {
    throw config_error("XLITE_SAVE_TENSORS_FMT='" + format + "' is not one of: text, dot");
  }
  settings.dot = format == "dot";
  return settings;
}

struct graph_dump {
  graph_dump_settings settings = read_graph_dump_settings();
  std::mutex mutex;
  std::int64_t runs = 0;
  bool warned = false;
};

inline graph_dump& dump_state() {
  static graph_dump state;
  return state;
}

} // namespace detail

// Whether XLITE_SAVE_TENSORS_FILE is set: a barrier builds the graph of a cache hit only then.
inline bool saving_graphs() { return detail::dump_state().settings.path.has_value(); }

// Appends `g` to XLITE_SAVE_TENSORS_FILE, if it is set. A file that cannot be opened is
// warned about once; the program goes on.
inline void save_graph_if_requested(const ir::graph& g, std::uint64_t hash, const step_cause& cause,
                                    std::span<const std::shared_ptr<const call_stack>> origins = {}) {
  auto& state = detail::dump_state();
  if (!state.settings.path) return;
  std::scoped_lock lock(state.mutex);
  std::ofstream out(*state.settings.path, std::ios::app);
  if (!out) {
    if (!std::exchange(state.warned, true)) {
      std::cerr << "xlite: warning: cannot open XLITE_SAVE_TENSORS_FILE " << *state.settings.path
                << "; graphs are not saved\n";
    }
    return;
  }
  out << "# graph " << state.runs++ << ", hash " << detail::hex(hash) << ", run by " << cause.reason << " at "
      << detail::location(cause.where) << '\n';
  out << (state.settings.dot ? ir::to_dot(g) : ir::to_text(g, origins)) << '\n';
}

} // namespace xlite::debug
