#pragma once

// Reading back a profile that xlite::profiler wrote (Chrome trace-event JSON), for tests
// that check what it drew where.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace xlite_test {

// One interval of a profile, in microseconds.
struct interval {
  std::string name;
  double begin, end;
};

// The profile written to `file`, by track name; the file is removed.
inline std::map<std::string, std::vector<interval>> read_profile(const std::filesystem::path& file) {
  std::ifstream in(file);
  const auto profile = nlohmann::json::parse(in);
  in.close();
  std::filesystem::remove(file);
  std::map<std::int64_t, std::string> track_names;
  for (const auto& e : profile["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") track_names[e["tid"]] = e["args"]["name"];
  }
  std::map<std::string, std::vector<interval>> by_track;
  for (const auto& e : profile["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double ts = e["ts"];
    by_track[track_names.at(e["tid"])].push_back({e["name"], ts, ts + e["dur"].get<double>()});
  }
  return by_track;
}

// The intervals of `track` named `name`.
inline std::vector<interval> named(const std::vector<interval>& track, const std::string& name) {
  std::vector<interval> found;
  std::ranges::copy_if(track, std::back_inserter(found), [&](const interval& e) { return e.name == name; });
  return found;
}

// Whether every interval of `inner` lies within one of `outer`.
inline bool nested_in(const std::vector<interval>& inner, const std::vector<interval>& outer) {
  return std::ranges::all_of(inner, [&](const interval& e) {
    return std::ranges::any_of(outer, [&](const interval& o) { return o.begin <= e.begin && e.end <= o.end; });
  });
}

} // namespace xlite_test
