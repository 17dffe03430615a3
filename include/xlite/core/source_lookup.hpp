#pragma once

// Names the frames of call stacks (core/call_stack.hpp): for each stack, the innermost
// line of the program that uses xlite, skipping frames inside xlite and the C++ library,
// inlined calls included.
//
// Lines come from the debug information through addr2line (binutils, which every GCC or
// Clang installation has): build with -g. Without it a stack is named by its innermost
// user function where the symbol table has one, else "unknown". Each address is looked up
// once per process; a printout runs addr2line once per module for the addresses not seen.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xlite/core/call_stack.hpp"

#if __has_include(<link.h>) && __has_include(<unistd.h>)
#include <link.h>
#include <unistd.h>
#define XLITE_HAS_DL_ITERATE_PHDR 1
#else
#define XLITE_HAS_DL_ITERATE_PHDR 0
#endif

namespace xlite {

namespace detail {

// One source position of an address; an inlined call has several, innermost first.
struct source_position {
  std::string function;
  std::string file_line;
};

// Whether a file is xlite's or the C++ library's, not the user's.
inline bool is_library_file(std::string_view file) {
  return file.find("/include/xlite/") != std::string_view::npos || file.starts_with("include/xlite/") ||
         file.find("/include/c++/") != std::string_view::npos;
}
// The same for a function, where the file is unknown: its qualified name (before the
// parameters; a template's return type may come first).
inline bool is_library_function(std::string_view function) {
  const std::string_view name = function.substr(0, function.find('('));
  const auto in = [&](std::string_view space) {
    return name.starts_with(space) || name.find(std::string(" ") + std::string(space)) != std::string_view::npos;
  };
  return function.starts_with("??") || function.starts_with("__") || in("xlite::") || in("std::");
}

// "file:line (function)" for the innermost position in the user's code, else the innermost
// user function's name, else "unknown".
inline std::string describe(std::span<const source_position* const> positions) {
  for (const source_position* p : positions) {
    if (!p->file_line.starts_with("??") && !is_library_file(p->file_line))
      return p->file_line + " (" + p->function + ")";
  }
  for (const source_position* p : positions) {
    if (p->file_line.starts_with("??") && !is_library_function(p->function)) return p->function;
  }
  return "unknown";
}

// The positions of `count` addresses in the output of `addr2line -a -f -C -i`: each
// address (0x...) is followed by a function line and a file:line line per position.
// Nothing when the output is not that.
inline std::optional<std::vector<std::vector<source_position>>> parse_addr2line(std::span<const std::string> lines,
                                                                                std::size_t count) {
  std::vector<std::vector<source_position>> result;
  for (std::size_t i = 0; i < lines.size();) {
    if (!lines[i].starts_with("0x")) return std::nullopt;
    std::vector<source_position>& positions = result.emplace_back();
    for (++i; i < lines.size() && !lines[i].starts_with("0x"); i += 2) {
      if (i + 1 == lines.size()) return std::nullopt; // a function without its file:line
      std::string file_line = lines[i + 1];
      if (const auto cut = file_line.find(" (discriminator"); cut != std::string::npos) file_line.erase(cut);
      // "/build/../src/a.cpp:12" (a compile directory joined to a relative name) as "/src/a.cpp:12".
      if (const auto colon = file_line.rfind(':'); colon != std::string::npos && colon > 0) {
        file_line =
            std::filesystem::path(file_line.substr(0, colon)).lexically_normal().string() + file_line.substr(colon);
      }
      positions.push_back({lines[i], std::move(file_line)});
    }
  }
  if (result.size() != count) return std::nullopt;
  return result;
}

// Where an address is: the file of its module and the address in that file's own terms
// (run-time address minus the module's load bias), which is what addr2line takes.
struct module_address {
  std::string module;
  std::uintptr_t address = 0;
};

inline std::optional<module_address> locate(void* return_address) {
#if XLITE_HAS_DL_ITERATE_PHDR
  struct search {
    std::uintptr_t address;
    std::optional<module_address> found;
  } s{reinterpret_cast<std::uintptr_t>(return_address) - 1, std::nullopt}; // the call is before its return address
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto& s = *static_cast<search*>(data);
        for (ElfW(Half) k = 0; k < info->dlpi_phnum; ++k) {
          const ElfW(Phdr)& segment = info->dlpi_phdr[k];
          const std::uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
          if (segment.p_type != PT_LOAD || s.address < begin || s.address >= begin + segment.p_memsz) continue;
          // The main program has no name here; addr2line runs in a child, so not /proc/self.
          const bool main_program = info->dlpi_name == nullptr || info->dlpi_name[0] == '\0';
          s.found = module_address{main_program ? "/proc/" + std::to_string(::getpid()) + "/exe" : info->dlpi_name,
                                   s.address - info->dlpi_addr};
          return 1;
        }
        return 0;
      },
      &s);
  return s.found;
#else
  static_cast<void>(return_address);
  return std::nullopt;
#endif
}

// addr2line's positions for `addresses` in `module`; nothing if it cannot run.
inline std::optional<std::vector<std::vector<source_position>>>
positions_in(const std::string& module, std::span<const std::uintptr_t> addresses) {
  if (module.find('\'') != std::string::npos) return std::nullopt; // it is quoted for the shell below
  std::ostringstream command;
  command << "addr2line -a -f -C -i -e '" << module << "'";
  for (const std::uintptr_t a : addresses) command << " 0x" << std::hex << a;
  command << " 2>/dev/null";
  FILE* pipe = ::popen(command.str().c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::vector<std::string> lines;
  std::string line;
  for (int c = std::fgetc(pipe); c != EOF; c = std::fgetc(pipe)) {
    if (c != '\n') {
      line += static_cast<char>(c);
    } else {
      lines.push_back(std::exchange(line, {}));
    }
  }
  ::pclose(pipe);
  return parse_addr2line(lines, addresses.size());
}

// Every address looked up so far, for the life of the process.
struct source_cache {
  std::mutex mutex;
  std::map<void*, std::vector<source_position>> positions;
};

inline source_cache& looked_up() {
  static source_cache cache;
  return cache;
}

} // namespace detail

// For each stack, where the user's code was: "file:line (function)", or the function's
// name without line information, or "unknown" (a null stack, no addr2line).
inline std::vector<std::string> user_locations(std::span<const call_stack* const> stacks) {
  auto& cache = detail::looked_up();
  std::scoped_lock lock(cache.mutex);
  std::map<std::string, std::vector<std::pair<void*, std::uintptr_t>>> by_module;
  for (const call_stack* s : stacks) {
    if (s == nullptr) continue;
    for (void* frame : s->frames()) {
      if (!cache.positions.try_emplace(frame).second) continue; // known, or already asked for
      if (const auto where = detail::locate(frame)) by_module[where->module].emplace_back(frame, where->address);
    }
  }
  constexpr std::size_t batch = 256; // addresses per addr2line command line
  for (const auto& [module, frames] : by_module) {
    for (std::size_t first = 0; first < frames.size(); first += batch) {
      const std::size_t count = std::min(batch, frames.size() - first);
      std::vector<std::uintptr_t> addresses;
      for (std::size_t i = first; i < first + count; ++i) addresses.push_back(frames[i].second);
      if (auto positions = detail::positions_in(module, addresses)) {
        for (std::size_t i = 0; i < count; ++i) cache.positions[frames[first + i].first] = std::move((*positions)[i]);
      }
    }
  }
  std::vector<std::string> result;
  for (const call_stack* s : stacks) {
    std::vector<const detail::source_position*> positions;
    for (void* frame : s ? s->frames() : std::span<void* const>{}) {
      for (const detail::source_position& p : cache.positions[frame]) positions.push_back(&p);
    }
    result.push_back(detail::describe(positions));
  }
  return result;
}

} // namespace xlite
