#pragma once

// Native kernels: an element-wise kernel's program compiled to machine code. The runtime
// interprets a kernel's program (runtime/elementwise.hpp) from its first step on, and
// meanwhile a thread of this header builds the kernel's C++ source (compile/native_source.hpp)
// into a shared library with the compiler this program was built with, loads it, and from
// then on runs it instead, with bitwise the same results. PyTorch Inductor's C++ backend
// builds its kernels with the system compiler the same way; XLA emits LLVM IR.
//
//   XLITE_NATIVE_KERNELS=0  interpret only (set_native_kernels(false) does it at run time)
//   XLITE_CXX               the compiler (default: the one CMake built this program with,
//                           XLITE_NATIVE_CXX; else c++). It must be that same compiler: a
//                           library made by another has another compile::native_tag() and
//                           is not run.
//   XLITE_NATIVE_FLAGS      more flags, space-separated (say, -I for an xsimd outside the
//                           compiler's default include path)
//   XLITE_NATIVE_INCLUDE    xlite's include directory (default: where CMake's xlite target
//                           has it, XLITE_NATIVE_INCLUDE; else this header's directory)
//
// Libraries are kept in <persistent cache>/native (see initialize_cache; not a read-only
// one), else in <temp>/xlite-native-<uid>, named by a hash of their source and command line, so a later
// process loads them without compiling. A library is written under a temporary name and
// renamed into place, so no process ever loads half of one. When building fails (no
// compiler, a compile error), xlite warns once and goes on interpreting.
//
// Metrics counters: NativeKernelBuilt, NativeKernelLoaded (found built), NativeKernelFailed;
// time metric NativeCompileTime.

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "xlite/compile/executable.hpp"
#include "xlite/compile/native_abi.hpp"
#include "xlite/core/env.hpp"
#include "xlite/ir/graph.hpp"
#include "xlite/runtime/compile_analysis.hpp"
#include "xlite/runtime/metrics.hpp"

extern char** environ;

namespace xlite::runtime {

namespace detail {

inline std::atomic<bool>& native_kernels_switch() {
  static std::atomic<bool> on{env_integer("XLITE_NATIVE_KERNELS", 0, 1).value_or(1) == 1};
  return on;
}

// The flags that make the compiler see what this translation unit saw: its ISA extensions
// (so kernels::simd_arch and the functors' code paths are the same), its floating-point
// contraction (the compiler's default, which takes effect only when optimising: g++
// contracts C++ in ISO mode too; an explicit -ffp-contract is not visible here, so a
// program built with one gets native kernels that may differ in the last bit) and
// fast-math.
inline std::vector<std::string> native_language_flags() {
  std::vector<std::string> flags{"-O2", "-fPIC", "-shared", "-w"};
#if defined(__STRICT_ANSI__)
  flags.push_back("-std=c++20");
#else
  flags.push_back("-std=gnu++20");
#endif
#if !defined(__OPTIMIZE__)
  flags.push_back("-ffp-contract=off"); // the compiler's C++ default applies only when it optimises
#endif
#if defined(__FAST_MATH__)
  flags.push_back("-ffast-math");
#endif
#if defined(__x86_64__)
  const std::pair<bool, const char*> features[] = {
#if defined(__SSE3__)
    {true, "-msse3"},
#endif
#if defined(__SSSE3__)
    {true, "-mssse3"},
#endif
#if defined(__SSE4_1__)
    {true, "-msse4.1"},
#endif
#if defined(__SSE4_2__)
    {true, "-msse4.2"},
#endif
#if defined(__POPCNT__)
    {true, "-mpopcnt"},
#endif
#if defined(__AVX__)
    {true, "-mavx"},
#endif
#if defined(__AVX2__)
    {true, "-mavx2"},
#endif
#if defined(__FMA__)
    {true, "-mfma"},
#endif
#if defined(__F16C__)
    {true, "-mf16c"},
#endif
#if defined(__BMI__)
    {true, "-mbmi"},
#endif
#if defined(__BMI2__)
    {true, "-mbmi2"},
#endif
#if defined(__LZCNT__)
    {true, "-mlzcnt"},
#endif
#if defined(__AVX512F__)
    {true, "-mavx512f"},
#endif
#if defined(__AVX512CD__)
    {true, "-mavx512cd"},
#endif
#if defined(__AVX512BW__)
    {true, "-mavx512bw"},
#endif
#if defined(__AVX512DQ__)
    {true, "-mavx512dq"},
#endif
#if defined(__AVX512VL__)
    {true, "-mavx512vl"},
#endif
#if defined(__AVX512BF16__)
    {true, "-mavx512bf16"},
#endif
#if defined(__AVX512VNNI__)
    {true, "-mavx512vnni"},
#endif
    {false, ""}, // so that the array is never empty
  };
  for (const auto& [present, flag] : features) {
    if (present) flags.push_back(flag);
  }
#endif
  return flags;
}

// xlite's include directory: XLITE_NATIVE_INCLUDE from the environment or from CMake, else
// found from this header's own path (relative when ccache rewrote it: then not found).
inline std::filesystem::path xlite_include_directory() {
  if (const auto dir = env_string("XLITE_NATIVE_INCLUDE")) return *dir;
#if defined(XLITE_NATIVE_INCLUDE)
  return XLITE_NATIVE_INCLUDE;
#else
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
#endif
}

inline std::uint64_t text_hash(std::string_view text, std::uint64_t seed = 0) {
  ir::hasher h;
  h.add(seed);
  for (const char c : text) h.add(static_cast<unsigned char>(c));
  return h.state;
}

} // namespace detail

// Whether kernels run as native code where it is built (XLITE_NATIVE_KERNELS, default on).
inline bool native_kernels_enabled() { return detail::native_kernels_switch().load(std::memory_order_relaxed); }
// Turning them off interprets every kernel from the next run on and builds no more.
inline void set_native_kernels(bool on) { detail::native_kernels_switch().store(on, std::memory_order_relaxed); }

// How this process builds native kernels: the command line and where libraries go, or why
// it cannot.
struct native_toolchain {
  std::vector<std::string> command; // compiler and flags; the source and output follow
  std::filesystem::path directory;
  std::string problem; // empty when kernels can be built

  // The toolchain for libraries kept under `cache` (a persistent cache's directory), or,
  // when it is empty, under the temporary directory.
  static native_toolchain find(const std::filesystem::path& cache) {
    native_toolchain t;
#if defined(XLITE_NATIVE_CXX)
    t.command.push_back(env_string("XLITE_CXX").value_or(XLITE_NATIVE_CXX));
#else
    t.command.push_back(env_string("XLITE_CXX").value_or("c++"));
#endif
    for (std::string& flag : detail::native_language_flags()) t.command.push_back(std::move(flag));
    const std::filesystem::path include = detail::xlite_include_directory();
    t.command.push_back("-I" + include.string());
    if (const auto extra = env_string("XLITE_NATIVE_FLAGS")) {
      std::istringstream words(*extra);
      for (std::string flag; words >> flag;) t.command.push_back(flag);
    }
    std::error_code failure;
    if (!std::filesystem::exists(include / "xlite/compile/native_abi.hpp", failure)) {
      t.problem = "xlite's headers are not at " + include.string() + " (set XLITE_NATIVE_INCLUDE)";
      return t;
    }
    t.directory = cache.empty()
                      ? std::filesystem::temp_directory_path(failure) / ("xlite-native-" + std::to_string(::getuid()))
                      : cache / "native";
    std::filesystem::create_directories(t.directory, failure);
    // The libraries are run: only this user may write where they are.
    struct stat status {};
    if (::stat(t.directory.c_str(), &status) != 0 || !S_ISDIR(status.st_mode)) {
      t.problem = "cannot make the directory " + t.directory.string();
    } else if (status.st_uid != ::getuid() || (status.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      t.problem = t.directory.string() + " is writable by others than this user";
    }
    return t;
  }

  // The library's path: a hash of the command and the source.
  std::filesystem::path library_for(const std::string& source) const {
    std::uint64_t h = detail::text_hash(source);
    for (const std::string& word : command) h = detail::text_hash(word, h);
    return directory / (debug::detail::hex(h) + ".so");
  }
};

// Builds and loads the native kernels of this process, one at a time, on a thread of its
// own; a source is built once per process however many kernels have it.
class native_kernel_builder {
public:
  static native_kernel_builder& instance() {
    static native_kernel_builder builder;
    return builder;
  }

  ~native_kernel_builder() {
    {
      std::scoped_lock lock(mutex_);
      stopping_ = true;
      queue_.clear();
      if (child_ > 0) ::kill(child_, SIGTERM); // a compiler still running is not waited for
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Gives `kernel` its entry point now if its source is built, else once it is; starts the
  // build if it is the first kernel with that source. `cache` is where libraries are kept
  // (see native_toolchain::find).
  void request(const std::shared_ptr<compile::native_kernel>& kernel, const std::filesystem::path& cache) {
    std::scoped_lock lock(mutex_);
    if (!toolchain_ || cache != toolchain_cache_) {
      toolchain_ = native_toolchain::find(cache);
      toolchain_cache_ = cache;
    }
    source_state& state = sources_[kernel->source];
    if (state.entry != nullptr) {
      kernel->entry.store(state.entry, std::memory_order_release);
      return;
    }
    if (state.failed) return;
    state.waiting.push_back(kernel);
    if (state.queued) return;
    state.queued = true;
    queue_.push_back({kernel->source, *toolchain_});
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    changed_.notify_all();
  }

  // Returns when every build requested so far has finished (or failed).
  void wait_idle() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return queue_.empty() && !building_; });
  }

  // Why the last build failed; empty if none has.
  std::string last_error() const {
    std::scoped_lock lock(mutex_);
    return last_error_;
  }

private:
  struct source_state {
    compile::native_entry entry = nullptr;
    std::vector<std::weak_ptr<compile::native_kernel>> waiting;
    bool queued = false;
    bool failed = false;
  };

  native_kernel_builder() = default;

  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      const auto [source, toolchain] = std::move(queue_.front());
      queue_.pop_front();
      building_ = true;
      lock.unlock();
      std::string problem = toolchain.problem;
      compile::native_entry entry = nullptr;
      if (problem.empty()) entry = load_or_build(toolchain, source, problem);
      lock.lock();
      if (stopping_) return; // the build was cut short: nothing to report
      source_state& state = sources_[source];
      state.queued = false;
      state.entry = entry;
      state.failed = entry == nullptr;
      for (const auto& waiting : state.waiting) {
        if (const auto kernel = waiting.lock()) kernel->entry.store(entry, std::memory_order_release);
      }
      state.waiting.clear();
      if (entry == nullptr) {
        failed_.fetch_add(1, std::memory_order_relaxed);
        if (last_error_.empty())
          std::cerr << "xlite: warning: native kernels unavailable (" << problem << "); interpreting\n";
        last_error_ = problem;
      }
      building_ = false;
      changed_.notify_all();
    }
  }

  // The entry point of `source`'s library: loaded if it was built before, else built now.
  compile::native_entry load_or_build(const native_toolchain& toolchain, const std::string& source,
                                      std::string& problem) {
    const std::filesystem::path library = toolchain.library_for(source);
    if (const auto entry = load(library, problem)) {
      loaded_.fetch_add(1, std::memory_order_relaxed);
      return entry;
    }
    problem.clear();
    {
      metrics::timer timing(compile_time_);
      if (!build(toolchain, source, library, problem)) return nullptr;
    }
    const auto entry = load(library, problem);
    if (entry != nullptr) built_.fetch_add(1, std::memory_order_relaxed);
    return entry;
  }

  static compile::native_entry load(const std::filesystem::path& library, std::string& problem) {
    std::error_code failure;
    if (!std::filesystem::exists(library, failure)) return nullptr;
    // Never closed: kernels of executables anywhere in the process may point into it.
    void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      problem = "cannot load " + library.string() + ": " + ::dlerror();
      return nullptr;
    }
    const auto tag = reinterpret_cast<const char* (*)()>(::dlsym(handle, compile::native_tag_symbol));
    const auto entry = reinterpret_cast<compile::native_entry>(::dlsym(handle, compile::native_entry_symbol));
    if (tag == nullptr || entry == nullptr) {
      problem = library.string() + " is not a native kernel";
    } else if (const std::string expected = compile::native_tag(); expected != tag()) {
      problem = library.string() + " was built as \"" + tag() + "\", this program is \"" + expected + "\"";
    } else {
      return entry;
    }
    ::dlclose(handle);
    return nullptr;
  }

  // Compiles `source` to `library` (under a temporary name, then renamed).
  bool build(const native_toolchain& toolchain, const std::string& source, const std::filesystem::path& library,
             std::string& problem) {
    const std::string stem =
        library.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(temporaries_++);
    const std::string source_path = stem + ".cpp", output = stem + ".so", log = stem + ".log";
    const auto clean_up = [&] {
      std::error_code ignored;
      for (const auto& path : {source_path, output, log}) std::filesystem::remove(path, ignored);
    };
    std::error_code failure;
    std::filesystem::create_directories(library.parent_path(), failure); // removed since find()?
    {
      std::ofstream file(source_path);
      file << source;
      if (!file.flush()) {
        problem = "cannot write " + source_path;
        clean_up();
        return false;
      }
    }
    std::vector<std::string> words = toolchain.command;
    words.insert(words.end(), {"-o", output, source_path});
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    pid_t pid = 0;
    int spawned = 0;
    {
      std::scoped_lock lock(mutex_);
      spawned = stopping_ ? ECANCELED : ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
      if (spawned == 0) child_ = pid;
    }
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
      problem = "cannot run " + words[0] + ": " + std::generic_category().message(spawned);
      clean_up();
      return false;
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    {
      std::scoped_lock lock(mutex_);
      child_ = 0;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::ifstream messages(log);
      std::string first_lines, line;
      for (int n = 0; n < 20 && std::getline(messages, line); ++n) first_lines += "\n  " + line;
      problem = words[0] + " failed on " + source_path + first_lines;
      clean_up();
      return false;
    }
    std::filesystem::rename(output, library, failure);
    if (failure) problem = "cannot rename " + output + " to " + library.string() + ": " + failure.message();
    clean_up();
    return !failure;
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<native_toolchain> toolchain_; // for the cache directory of the last request
  std::filesystem::path toolchain_cache_;
  std::unordered_map<std::string, source_state> sources_;
  struct job {
    std::string source;
    native_toolchain toolchain;
  };
  std::deque<job> queue_;
  bool building_ = false;
  bool stopping_ = false;
  pid_t child_ = 0;
  std::uint64_t temporaries_ = 0;
  std::string last_error_;
  // Made before the thread, so destroyed after it.
  std::atomic<std::int64_t>& built_ = metrics::counter("NativeKernelBuilt");
  std::atomic<std::int64_t>& loaded_ = metrics::counter("NativeKernelLoaded");
  std::atomic<std::int64_t>& failed_ = metrics::counter("NativeKernelFailed");
  metrics::metric compile_time_{"NativeCompileTime"};
  std::thread thread_;
};

// Requests the native kernels of e's kernels (and of their subprograms), unless they are
// off; the program's kernels run interpreted until theirs are built.
inline void request_native_kernels(const compile::executable& e, const std::filesystem::path& cache) {
  if (!native_kernels_enabled()) return;
  for (const compile::kernel& k : e.kernels) {
    if (k.native) native_kernel_builder::instance().request(k.native, cache);
    for (const auto& sub : k.subprograms) request_native_kernels(*sub, cache);
  }
}

// Returns when the native kernels requested so far are built (or have failed): for tests
// and benchmarks that need them in use.
inline void wait_native_kernels() { native_kernel_builder::instance().wait_idle(); }

// Why building a native kernel last failed; empty if it never has.
inline std::string native_kernel_error() { return native_kernel_builder::instance().last_error(); }

} // namespace xlite::runtime
