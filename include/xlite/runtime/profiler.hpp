#pragma once

// The profiler, PyTorch/XLA's profiler and xp.Trace for xlite: it records intervals on
// named tracks and writes them as Chrome trace-event JSON, which ui.perfetto.dev and
// chrome://tracing open (docs/profiling.md).
//
//   xlite::profiler::start("step.json");
//   { xlite::profiler::scope s("data loading"); ... }      // on the "user" track
//   xlite::profiler::stop();                                // writes step.json
//
// XLITE_PROFILE=path records the whole process. Recording is cheap (a clock read and an
// append under a mutex) and costs one relaxed atomic load when the profiler is off. Only std
// and core headers here: every layer may record.

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "xlite/core/atomic_file.hpp"
#include "xlite/core/env.hpp"
#include "xlite/core/error.hpp"

namespace xlite::profiler {

// One row of the timeline: a Chrome trace "thread", named by metadata and shown in the order
// of the factories below (host first, then devices, then what crosses between them).
class track {
public:
  // Building each step's graph on the host thread.
  static constexpr track host_tracing() noexcept { return track(kind::host_tracing, 0); }
  // Compiling graphs.
  static constexpr track host_compile() noexcept { return track(kind::host_compile, 0); }
  // Executions on device cpu:ordinal, one track per device.
  static constexpr track device(std::int64_t ordinal) {
    if (ordinal < 0 || ordinal >= max_devices) {
      throw value_error(xlite::detail::message("profiler::track::device(", ordinal, "): a device ordinal is in [0, ",
                                               max_devices, ")"));
    }
    return track(kind::device, ordinal);
  }
  // Copies between host and devices: to_host, item, from.
  static constexpr track transfers() noexcept { return track(kind::transfers, 0); }
  static constexpr track collectives() noexcept { return track(kind::collectives, 0); }
  // What the program marks itself; profiler::scope's default.
  static constexpr track user() noexcept { return track(kind::user, 0); }

  std::string name() const {
    switch (kind_) {
    case kind::host_tracing:
      return "host: tracing";
    case kind::host_compile:
      return "host: compile";
    case kind::device:
      return "device cpu:" + std::to_string(ordinal_);
    case kind::transfers:
      return "transfers";
    case kind::collectives:
      return "collectives";
    case kind::user:
      return "user";
    }
    return "unknown";
  }

  // The Chrome tid: small, because Perfetto prints it beside the name.
  constexpr std::int64_t id() const noexcept {
    return kind_ == kind::device ? first_device_id + ordinal_ : static_cast<std::int64_t>(kind_) + 1;
  }

  // The viewer's row order: devices sit between the host and the rest, however many there are.
  constexpr std::int64_t sort_index() const noexcept {
    switch (kind_) {
    case kind::host_tracing:
      return 0;
    case kind::host_compile:
      return 1;
    case kind::device:
      return 2 + ordinal_;
    default:
      return 2 + max_devices + static_cast<std::int64_t>(kind_);
    }
  }

  friend constexpr bool operator==(const track&, const track&) = default;

private:
  enum class kind : std::uint8_t { host_tracing, host_compile, transfers, collectives, user, device };
  static constexpr std::int64_t max_devices = 1 << 20;
  static constexpr std::int64_t first_device_id = 10;

  constexpr track(kind k, std::int64_t ordinal) noexcept : kind_(k), ordinal_(ordinal) {}

  kind kind_;
  std::int64_t ordinal_;
};

// One key/value shown under the event's "args" in the viewer, e.g. {"graph hash", "0x1234"}.
struct arg {
  std::string_view key;
  std::string_view value;
};

namespace detail {

using clock = std::chrono::steady_clock;
using owned_args = std::vector<std::pair<std::string, std::string>>;

struct event {
  track where;
  std::string name;
  std::int64_t begin_ns; // since start()
  std::int64_t duration_ns;
  owned_args args;
};

// Constant-initialised, so active() is right even during other objects' static
// initialisation. Relaxed loads suffice: record() checks again under the mutex.
inline std::atomic<bool> recording{false};

struct session {
  std::mutex mutex;
  bool on = false;            // under mutex; `recording` mirrors it for the fast path
  std::filesystem::path path; // absolute, so a chdir() between start and stop does not move it
  std::string shown_path;     // as the caller wrote it, for messages
  std::string started_by;     // "start()" or "XLITE_PROFILE", for messages
  clock::time_point origin;
  std::vector<event> events;
};

// Never destroyed: a device worker still running during exit may record into it (and is
// dropped, since the profile was written and `recording` is off).
inline session& state() {
  static session* const s = new session;
  return *s;
}

inline owned_args own(std::initializer_list<arg> args) {
  owned_args owned;
  owned.reserve(args.size());
  for (const auto& a : args) owned.emplace_back(std::string(a.key), std::string(a.value));
  return owned;
}

inline void append(track where, std::string&& name, clock::time_point begin, clock::time_point end, owned_args&& args) {
  auto& s = state();
  std::scoped_lock lock(s.mutex);
  if (!s.on || end < s.origin) return;
  begin = std::max(begin, s.origin); // the part of the interval inside this session
  const auto ns = [](clock::duration d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); };
  s.events.push_back({where, std::move(name), ns(begin - s.origin), ns(end - begin), std::move(args)});
}

// The length of the valid UTF-8 sequence at text[i], or 0 (Unicode's Table 3-7: no
// overlong forms, no surrogates, nothing above U+10FFFF).
inline std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF; // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size() || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
  }
  return length;
}

// A JSON string. Bytes that are not UTF-8 become U+FFFD: one bad name must not make the
// whole file unreadable.
inline void append_json_string(std::string& out, std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t length = utf8_length(text, i);
      if (length == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 0xF];
      } else {
        out += static_cast<char>(c);
      }
    }
    ++i;
  }
  out += '"';
}

inline void append_integer(std::string& out, std::int64_t value) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out.append(digits, end);
}

// Nanoseconds as microseconds with three decimals: exact, so nesting survives the printing.
inline void append_microseconds(std::string& out, std::int64_t ns) {
  append_integer(out, ns / 1000);
  const auto fraction = ns % 1000;
  out += '.';
  out += static_cast<char>('0' + fraction / 100);
  out += static_cast<char>('0' + fraction / 10 % 10);
  out += static_cast<char>('0' + fraction % 10);
}

// A Chrome "M" event; `value` is JSON already.
inline void append_metadata(std::string& out, std::int64_t tid, std::string_view name, std::string_view key,
                            std::string_view value) {
  out += "{\"name\":";
  append_json_string(out, name);
  out += ",\"ph\":\"M\",\"pid\":1,\"tid\":";
  append_integer(out, tid);
  out += ",\"args\":{";
  append_json_string(out, key);
  out += ':';
  out += value;
  out += "}},\n";
}

inline std::string to_json(std::vector<event>& events) {
  // Sorted by track, start and longest first, so parents precede their children.
  std::sort(events.begin(), events.end(), [](const event& a, const event& b) {
    const auto key = [](const event& e) { return std::tuple(e.where.id(), e.begin_ns, -e.duration_ns); };
    return key(a) < key(b);
  });
  std::map<std::int64_t, track> tracks;
  for (const auto& e : events) tracks.emplace(e.where.id(), e.where);

  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  append_metadata(out, 0, "process_name", "name", "\"xlite\"");
  for (const auto& [tid, t] : tracks) {
    std::string name, sort_index;
    append_json_string(name, t.name());
    append_integer(sort_index, t.sort_index());
    append_metadata(out, tid, "thread_name", "name", name);
    append_metadata(out, tid, "thread_sort_index", "sort_index", sort_index);
  }
  for (const auto& e : events) {
    out += "{\"name\":";
    append_json_string(out, e.name);
    out += ",\"ph\":\"X\",\"pid\":1,\"tid\":";
    append_integer(out, e.where.id());
    out += ",\"ts\":";
    append_microseconds(out, e.begin_ns);
    out += ",\"dur\":";
    append_microseconds(out, e.duration_ns);
    if (!e.args.empty()) {
      out += ",\"args\":{";
      for (std::size_t i = 0; i < e.args.size(); ++i) {
        if (i > 0) out += ',';
        append_json_string(out, e.args[i].first);
        out += ':';
        append_json_string(out, e.args[i].second);
      }
      out += '}';
    }
    out += "},\n";
  }
  out.resize(out.size() - 2); // the last ",\n"; the process_name event is always there
  out += "\n]}\n";
  return out;
}

inline std::string reason(int error) {
  return error == 0 ? std::string() : ": " + std::generic_category().message(error);
}

inline void start(const std::filesystem::path& path, std::string_view started_by) {
  auto& s = state();
  std::scoped_lock lock(s.mutex);
  if (s.on) {
    throw value_error(xlite::detail::message("profiler::start('", path.string(), "'): already recording to '",
                                             s.shown_path, "' (from ", s.started_by, "); stop() it first"));
  }
  std::error_code failure;
  auto absolute = std::filesystem::absolute(path, failure);
  if (failure) {
    throw io_error(xlite::detail::message("profiler::start: cannot create the profile '", path.string(),
                                          "': ", failure.message()));
  }
  // Created now, so a bad path fails here rather than after a long run.
  errno = 0;
  std::ofstream probe(absolute, std::ios::binary | std::ios::trunc);
  if (!probe) {
    throw io_error(
        xlite::detail::message("profiler::start: cannot create the profile '", path.string(), "'", reason(errno)));
  }
  probe.close();
  s.path = std::move(absolute);
  s.shown_path = path.string();
  s.started_by = started_by;
  s.events.clear();
  s.origin = clock::now();
  s.on = true;
  recording.store(true, std::memory_order_relaxed);
}

} // namespace detail

// Whether a profile is being recorded: instrumented code may skip building names and
// arguments when it is not.
inline bool active() noexcept { return detail::recording.load(std::memory_order_relaxed); }

// Starts recording into `path`, which is created (or emptied) now: a path that cannot be
// written is an io_error here, not at stop(). A value_error while already recording.
inline void start(const std::filesystem::path& path) { detail::start(path, "start()"); }

// Writes the profile and stops recording; nothing when not recording. The profiler is off
// afterwards even if writing fails (an io_error naming the file).
inline void stop() {
  auto& s = detail::state();
  // The lock is held while writing so a start() cannot overlap; threads recording meanwhile
  // see `recording` off and return without waiting.
  std::scoped_lock lock(s.mutex);
  if (!s.on) return;
  s.on = false;
  detail::recording.store(false, std::memory_order_relaxed);
  auto events = std::move(s.events);
  s.events = {};
  // Atomically: a viewer opening the file meanwhile sees the empty file start() made or the
  // whole profile, never half.
  atomic_file file(s.path, "profiler::stop: the profile");
  file.write(detail::to_json(events));
  file.commit();
}

// An interval measured elsewhere, e.g. by a device worker around an execution. Only the
// part after start() is kept, and nothing when not recording. End before begin is a
// value_error: read the times before the call, since record(t, n, now(), now()) evaluates
// its arguments in no fixed order.
inline void record(track where, std::string_view name, std::chrono::steady_clock::time_point begin,
                   std::chrono::steady_clock::time_point end, std::initializer_list<arg> args = {}) {
  if (end < begin) {
    throw value_error(xlite::detail::message("profiler::record('", name, "'): the interval ends ",
                                             std::chrono::duration_cast<std::chrono::nanoseconds>(begin - end).count(),
                                             " ns before it begins"));
  }
  if (!active()) return;
  detail::append(where, std::string(name), begin, end, detail::own(args));
}

// Records the time from construction to destruction, like xp.Trace. Scopes on one track
// nest in the viewer. A scope opened while the profiler is off is not recorded.
class scope {
public:
  [[nodiscard]] explicit scope(std::string_view name, std::initializer_list<arg> args = {})
      : scope(track::user(), name, args) {}
  [[nodiscard]] scope(track where, std::string_view name, std::initializer_list<arg> args = {})
      : where_(where), open_(active()) {
    if (!open_) return;
    name_ = name;
    args_ = detail::own(args);
    begin_ = detail::clock::now(); // last, so copying the name is not timed
  }
  ~scope() {
    if (open_) detail::append(where_, std::move(name_), begin_, detail::clock::now(), std::move(args_));
  }
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;

  // For what is known only inside the scope, such as whether a compilation hit the cache.
  void add_arg(std::string_view key, std::string_view value) {
    if (open_) args_.emplace_back(std::string(key), std::string(value));
  }

private:
  track where_;
  bool open_;
  std::string name_;
  detail::owned_args args_;
  detail::clock::time_point begin_;
};

namespace detail {

// XLITE_PROFILE starts at static initialisation rather than at first use: active() stays a
// single load with no first-use check, the profile covers the first step (tracing and
// compiling it is often the longest part), and this object is constructed before any
// device worker, so it is destroyed after them: their last executions are in the file.
// At exit it writes whatever is still being recorded, from XLITE_PROFILE or start().
struct exit_writer {
  exit_writer() {
    const auto path = env_string("XLITE_PROFILE");
    if (!path) return;
    try {
      start(*path, "XLITE_PROFILE");
    } catch (const std::exception& failure) {
      // Throwing here would terminate before main(); profiling is not worth that.
      std::ios_base::Init streams; // std::cerr is usable this early only with one of these
      std::cerr << "xlite: XLITE_PROFILE is ignored: " << failure.what() << '\n';
    }
  }
  // Nothing may escape: an exception from a destructor at exit terminates the process.
  ~exit_writer() {
    try {
      stop();
    } catch (const std::exception& failure) {
      std::ios_base::Init streams;
      std::cerr << "xlite: the profile was not written: " << failure.what() << '\n';
    } catch (...) {
      std::ios_base::Init streams;
      std::cerr << "xlite: the profile was not written\n";
    }
  }
  exit_writer(const exit_writer&) = delete;
  exit_writer& operator=(const exit_writer&) = delete;
};

inline exit_writer at_exit;

} // namespace detail
} // namespace xlite::profiler
