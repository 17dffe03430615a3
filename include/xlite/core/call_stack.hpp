#pragma once

// The call stack at a point of the program, kept as return addresses (cheap to take) and
// turned into the user's file:line only when someone prints it: what XLITE_IR_DEBUG
// records for each IR node, as PyTorch/XLA's XLA_IR_DEBUG records the Python frames.
//
// Names come from the debug information through addr2line (binutils, which every GCC or
// Clang installation has), run once per module for all the addresses of a printout. A
// frame inside xlite or the standard library is skipped, inlined frames included: the
// location is the innermost line of the program that uses xlite. Without -g there is no
// line to find, and the function's name is given instead.

#include <dlfcn.h>
#include <link.h> // ElfW and the ELF header
#include <execinfo.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xlite {

class call_stack {
public:
  static constexpr int max_frames = 32;

  // The stack of the calling thread.
  static std::shared_ptr<const call_stack> capture() {
    auto stack = std::make_shared<call_stack>();
    stack->count_ = ::backtrace(stack->frames_.data(), max_frames);
    return stack;
  }

  // Return addresses, innermost first.
  std::span<void* const> frames() const noexcept {
    return {frames_.data(), static_cast<std::size_t>(count_ < 0 ? 0 : count_)};
  }

private:
  std::array<void*, max_frames> frames_{};
  int count_ = 0;
};

namespace detail {

// One source position addr2line gives for an address; an inlined call gives several,
// innermost first.
struct source_position {
  std::string function;
  std::string file_line;
};

// Whether a position is in xlite's headers or the C++ library, not in the user's code.
inline bool is_library_file(std::string_view file) {
  return file.find("include/xlite/") != std::string_view::npos || file.find("/c++/") != std::string_view::npos;
}
// The same for a function's name, where the file is unknown: the qualified name before
// the parameters (a template's return type may come first).
inline bool is_library_function(std::string_view function) {
  const std::string_view name = function.substr(0, function.find('('));
  return function.starts_with("??") || name.find("xlite::") != std::string_view::npos ||
         name.find("std::") != std::string_view::npos || name.find("__") != std::string_view::npos;
}

// "file:line (function)" for the innermost position in the user's code, else the innermost
// user function's name, else "unknown".
inline std::string describe(std::span<const source_position* const> positions) {
  for (const source_position* p : positions) {
    if (!p->file_line.starts_with("??") && !is_library_file(p->file_line)) return p->file_line + " (" + p->function + ")";
  }
  for (const source_position* p : positions) {
    if (p->file_line.starts_with("??") && !is_library_function(p->function)) return p->function;
  }
  return "unknown";
}

// Where an address is: its module's file and the address addr2line takes for it.
struct module_address {
  std::string module;
  std::uintptr_t address = 0;
};

inline std::optional<module_address> locate(void* return_address) {
  // A return address is the instruction after the call; the call itself is one byte back.
  const auto address = reinterpret_cast<std::uintptr_t>(return_address) - 1;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(address), &info) == 0 || info.dli_fbase == nullptr) return std::nullopt;
  // Position-independent modules (shared libraries, PIE programs) are looked up by offset.
  const auto* header = static_cast<const ElfW(Ehdr)*>(info.dli_fbase);
  const bool relocatable = header->e_type == ET_DYN;
  const auto base = reinterpret_cast<std::uintptr_t>(info.dli_fbase);
  // The main program's name is what it was started as; /proc/self/exe always opens it.
  const bool main_program = info.dli_fname == nullptr || std::string_view(info.dli_fname).find('/') == std::string_view::npos;
  return module_address{main_program ? "/proc/self/exe" : info.dli_fname, relocatable ? address - base : address};
}

// addr2line's positions for `addresses` in `module`, one list per address.
inline std::vector<std::vector<source_position>> positions_in(const std::string& module,
                                                              std::span<const std::uintptr_t> addresses) {
  std::vector<std::vector<source_position>> result;
  if (module.find('\'') != std::string::npos) return result; // it is quoted for the shell below
  std::ostringstream command;
  command << "addr2line -a -f -C -i -e '" << module << "'";
  for (const std::uintptr_t a : addresses) command << " 0x" << std::hex << a;
  command << " 2>/dev/null";
  FILE* pipe = ::popen(command.str().c_str(), "r");
  if (pipe == nullptr) return result;
  std::vector<std::string> lines;
  std::array<char, 4096> buffer;
  std::string line;
  while (std::fgets(buffer.data(), static_cast<int>(buffer.size()), pipe) != nullptr) {
    line += buffer.data();
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      lines.push_back(std::exchange(line, {}));
    }
  }
  ::pclose(pipe);
  // -a prints each address (0x...), then a function line and a file:line line for each
  // position (several for inlined calls).
  for (std::size_t i = 0; i < lines.size();) {
    if (!lines[i].starts_with("0x")) return {}; // not addr2line's output: resolve nothing
    std::vector<source_position>& positions = result.emplace_back();
    for (++i; i + 1 < lines.size() && !lines[i].starts_with("0x"); i += 2) {
      std::string file_line = lines[i + 1];
      if (const auto cut = file_line.find(" (discriminator"); cut != std::string::npos) file_line.erase(cut);
      // "/build/../src/a.cpp:12" (a compile directory joined to a relative name) as "/src/a.cpp:12".
      const auto colon = file_line.rfind(':');
      if (colon != std::string::npos && colon > 0) {
        file_line = std::filesystem::path(file_line.substr(0, colon)).lexically_normal().string() + file_line.substr(colon);
      }
      positions.push_back({lines[i], std::move(file_line)});
    }
  }
  if (result.size() != addresses.size()) result.clear();
  return result;
}

} // namespace detail

// For each stack, where the user's code was: "file:line (function)", or "function" when the
// program has no line information, or "unknown" when nothing names it (a null stack, no
// addr2line). Resolves all the stacks' addresses with one addr2line run per module.
inline std::vector<std::string> user_locations(std::span<const call_stack* const> stacks) {
  std::map<void*, std::vector<detail::source_position>> resolved;
  std::map<std::string, std::vector<std::pair<void*, std::uintptr_t>>> by_module;
  for (const call_stack* s : stacks) {
    if (s == nullptr) continue;
    for (void* frame : s->frames()) {
      if (resolved.contains(frame)) continue;
      resolved[frame] = {};
      if (const auto where = detail::locate(frame)) by_module[where->module].emplace_back(frame, where->address);
    }
  }
  for (const auto& [module, frames] : by_module) {
    std::vector<std::uintptr_t> addresses;
    for (const auto& f : frames) addresses.push_back(f.second);
    auto positions = detail::positions_in(module, addresses);
    for (std::size_t i = 0; i < positions.size(); ++i) resolved[frames[i].first] = std::move(positions[i]);
  }
  std::vector<std::string> result;
  for (const call_stack* s : stacks) {
    std::vector<const detail::source_position*> positions;
    for (void* frame : s ? s->frames() : std::span<void* const>{}) {
      for (const detail::source_position& p : resolved[frame]) positions.push_back(&p);
    }
    result.push_back(detail::describe(positions));
  }
  return result;
}

} // namespace xlite
