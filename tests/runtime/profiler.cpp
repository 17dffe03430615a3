#include <xlite/runtime/profiler.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
namespace profiler = xlite::profiler;
using Catch::Matchers::Contains;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A directory of its own per test: CTest may run test cases in parallel processes.
struct temp_dir {
  fs::path path;
  temp_dir() {
    static int count = 0;
    path = fs::temp_directory_path() / ("xlite_profiler_" + std::to_string(::getpid()) + "_" + std::to_string(count++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  fs::path operator/(const char* name) const { return path / name; }
};

// Stops a session a failed check left running, so the next test can start one.
struct stop_at_end {
  ~stop_at_end() {
    try {
      profiler::stop();
    } catch (...) {
    }
  }
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

json read_profile(const fs::path& path) {
  const auto text = read_text(path);
  INFO("the profile:\n" << text);
  json profile;
  REQUIRE_NOTHROW(profile = json::parse(text));
  REQUIRE(profile.is_object());
  REQUIRE(profile["traceEvents"].is_array());
  return profile;
}

// The complete ("X") events, optionally only those on one track.
std::vector<json> complete_events(const json& profile) {
  std::vector<json> events;
  for (const auto& e : profile["traceEvents"]) {
    if (e["ph"] == "X") events.push_back(e);
  }
  return events;
}

std::vector<json> events_named(const json& profile, const std::string& name) {
  std::vector<json> events;
  for (const auto& e : complete_events(profile)) {
    if (e["name"] == name) events.push_back(e);
  }
  return events;
}

json the_event(const json& profile, const std::string& name) {
  const auto events = events_named(profile, name);
  INFO("event " << name);
  REQUIRE(events.size() == 1);
  return events[0];
}

// Track names by tid, from the thread_name metadata.
std::map<std::int64_t, std::string> track_names(const json& profile) {
  std::map<std::int64_t, std::string> names;
  for (const auto& e : profile["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") names[e["tid"].get<std::int64_t>()] = e["args"]["name"];
  }
  return names;
}

std::string track_of(const json& profile, const json& event) {
  return track_names(profile).at(event["tid"].get<std::int64_t>());
}

// Timestamps are microseconds with three decimals, i.e. whole nanoseconds.
std::int64_t nanoseconds(const json& value) { return std::llround(value.get<double>() * 1000.0); }

bool inside(const json& child, const json& parent) {
  const auto child_begin = nanoseconds(child["ts"]), parent_begin = nanoseconds(parent["ts"]);
  return child["tid"] == parent["tid"] && parent_begin <= child_begin &&
         child_begin + nanoseconds(child["dur"]) <= parent_begin + nanoseconds(parent["dur"]);
}

} // namespace

TEST_CASE("profiler: the file is Chrome trace-event JSON with a named row per track used", "[profiler]") {
  temp_dir dir;
  stop_at_end guard;
  profiler::start(dir / "tracks.json");
  CHECK(profiler::active());
  { profiler::scope s("on user"); }
  { profiler::scope s(profiler::track::host_tracing(), "on tracing"); }
  { profiler::scope s(profiler::track::host_compile(), "on compile"); }
  { profiler::scope s(profiler::track::device(3), "on cpu:3"); }
  { profiler::scope s(profiler::track::device(0), "on cpu:0"); }
  { profiler::scope s(profiler::track::transfers(), "on transfers"); }
  { profiler::scope s(profiler::track::collectives(), "on collectives"); }
  profiler::stop();
  CHECK_FALSE(profiler::active());

  const auto profile = read_profile(dir / "tracks.json");
  CHECK(profile["displayTimeUnit"] == "ns");
  for (const auto& e : profile["traceEvents"]) {
    INFO(e.dump());
    CHECK(e["pid"] == 1);
    CHECK(e["tid"].is_number_integer());
    CHECK(e["name"].is_string());
  }
  const std::map<std::string, std::string> expected = {{"on user", "user"},
                                                       {"on tracing", "host: tracing"},
                                                       {"on compile", "host: compile"},
                                                       {"on cpu:3", "device cpu:3"},
                                                       {"on cpu:0", "device cpu:0"},
                                                       {"on transfers", "transfers"},
                                                       {"on collectives", "collectives"}};
  CHECK(complete_events(profile).size() == expected.size());
  for (const auto& [event, track] : expected) CHECK(track_of(profile, the_event(profile, event)) == track);

  // Rows sort as: host, devices by ordinal, then the rest; the process is named.
  std::map<std::int64_t, std::int64_t> sort_index;
  bool process_named = false;
  for (const auto& e : profile["traceEvents"]) {
    if (e["ph"] != "M") continue;
    if (e["name"] == "thread_sort_index") sort_index[e["tid"].get<std::int64_t>()] = e["args"]["sort_index"];
    if (e["name"] == "process_name") process_named = e["args"]["name"] == "xlite";
  }
  CHECK(process_named);
  const auto names = track_names(profile);
  REQUIRE(names.size() == expected.size());
  REQUIRE(sort_index.size() == names.size());
  std::vector<std::pair<std::int64_t, std::string>> rows;
  for (const auto& [tid, name] : names) rows.emplace_back(sort_index.at(tid), name);
  std::sort(rows.begin(), rows.end());
  std::vector<std::string> order;
  for (const auto& row : rows) order.push_back(row.second);
  CHECK(order == std::vector<std::string>{"host: tracing", "host: compile", "device cpu:0", "device cpu:3", "transfers",
                                          "collectives", "user"});
}

TEST_CASE("profiler: tracks have names, distinct ids, and device ordinals are checked", "[profiler]") {
  using profiler::track;
  CHECK(track::device(2).name() == "device cpu:2");
  CHECK(track::host_tracing().name() == "host: tracing");
  CHECK(track::device(2) == track::device(2));
  CHECK_FALSE(track::device(2) == track::device(1));
  std::set<std::int64_t> ids;
  for (const auto t : {track::host_tracing(), track::host_compile(), track::transfers(), track::collectives(),
                       track::user(), track::device(0), track::device(1), track::device(4095)}) {
    CHECK(ids.insert(t.id()).second);
  }
  CHECK_THROWS_AS(track::device(-1), xlite::value_error);
  CHECK_THROWS_WITH(track::device(-1), Contains("track::device(-1)"));
}

TEST_CASE("profiler: nested scopes nest, siblings do not overlap", "[profiler]") {
  temp_dir dir;
  stop_at_end guard;
  profiler::start(dir / "nested.json");
  {
    profiler::scope outer("outer");
    std::this_thread::sleep_for(1ms);
    {
      profiler::scope middle("middle");
      { profiler::scope inner("inner"); }
      std::this_thread::sleep_for(1ms);
    }
    { profiler::scope sibling("sibling"); }
    std::this_thread::sleep_for(1ms);
  }
  profiler::stop();

  const auto profile = read_profile(dir / "nested.json");
  const auto outer = the_event(profile, "outer"), middle = the_event(profile, "middle"),
             inner = the_event(profile, "inner"), sibling = the_event(profile, "sibling");
  CHECK(inside(inner, middle));
  CHECK(inside(middle, outer));
  CHECK(inside(sibling, outer));
  CHECK(nanoseconds(middle["ts"]) + nanoseconds(middle["dur"]) <= nanoseconds(sibling["ts"]));
  CHECK(nanoseconds(outer["dur"]) >= 3'000'000); // three sleeps of 1 ms
  CHECK_FALSE(inside(outer, middle));
}

TEST_CASE("profiler: events from several threads at once are all recorded", "[profiler]") {
  temp_dir dir;
  stop_at_end guard;
  profiler::start(dir / "threads.json");
  constexpr int threads = 4, per_thread = 250;
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([t, &go] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < per_thread; ++i) {
        profiler::scope s(profiler::track::device(t), "execute " + std::to_string(i));
        profiler::scope user("user " + std::to_string(t) + " " + std::to_string(i));
      }
    });
  }
  go = true;
  for (auto& w : workers) w.join();
  profiler::stop();

  const auto profile = read_profile(dir / "threads.json");
  const auto names = track_names(profile);
  CHECK(complete_events(profile).size() == std::size_t{2 * threads * per_thread});
  std::map<std::string, std::set<std::string>> by_track;
  for (const auto& e : complete_events(profile))
    by_track[names.at(e["tid"].get<std::int64_t>())].insert(e["name"].get<std::string>());
  for (int t = 0; t < threads; ++t) {
    const auto& executions = by_track["device cpu:" + std::to_string(t)];
    CHECK(executions.size() == std::size_t{per_thread});
    CHECK(executions.count("execute 0") == 1);
    CHECK(executions.count("execute " + std::to_string(per_thread - 1)) == 1);
    CHECK(by_track["user"].count("user " + std::to_string(t) + " " + std::to_string(per_thread - 1)) == 1);
  }
  CHECK(by_track["user"].size() == std::size_t{threads * per_thread});
}

TEST_CASE("profiler: record() places an interval measured elsewhere exactly", "[profiler]") {
  temp_dir dir;
  stop_at_end guard;
  const auto before = std::chrono::steady_clock::now();
  profiler::start(dir / "record.json");
  const auto begin = std::chrono::steady_clock::now();
  profiler::record(profiler::track::device(1), "execution", begin, begin + 1'234'567ns);
  profiler::record(profiler::track::device(1), "later", begin + 5ms, begin + 5ms + 1ns);
  profiler::record(profiler::track::transfers(), "instant", begin + 7ms, begin + 7ms);
  // Only the part after start() is kept; what ended before it is dropped.
  profiler::record(profiler::track::transfers(), "straddles start", before - 1s, begin + 2ms);
  profiler::record(profiler::track::transfers(), "before start", before - 2s, before - 1s);
  const auto after = std::chrono::steady_clock::now();
  profiler::stop();

  const auto text = read_text(dir / "record.json");
  CHECK_THAT(text, Contains("\"dur\":1234.567"));
  CHECK_THAT(text, Contains("\"dur\":0.001"));
  const auto profile = read_profile(dir / "record.json");
  const auto execution = the_event(profile, "execution"), later = the_event(profile, "later");
  CHECK(track_of(profile, execution) == "device cpu:1");
  CHECK(nanoseconds(execution["dur"]) == 1'234'567);
  CHECK(nanoseconds(later["ts"]) - nanoseconds(execution["ts"]) == 5'000'000);
  CHECK(nanoseconds(later["dur"]) == 1);
  CHECK(nanoseconds(the_event(profile, "instant")["dur"]) == 0);
  // ts counts from start(), which happened between `before` and `begin`.
  CHECK(execution["ts"].get<double>() >= 0.0);
  CHECK(nanoseconds(execution["ts"]) <= std::chrono::nanoseconds(after - before).count());
  const auto straddles = the_event(profile, "straddles start");
  CHECK(nanoseconds(straddles["ts"]) == 0);
  CHECK(nanoseconds(straddles["dur"]) == nanoseconds(execution["ts"]) + 2'000'000);
  CHECK(events_named(profile, "before start").empty());

  CHECK_THROWS_AS(profiler::record(profiler::track::user(), "backwards", begin, begin - 1us), xlite::value_error);
  CHECK_THROWS_WITH(profiler::record(profiler::track::user(), "backwards", begin, begin - 1us),
                    Contains("'backwards'") && Contains("1000 ns before"));
}

TEST_CASE("profiler: args appear under the event's args", "[profiler]") {
  temp_dir dir;
  stop_at_end guard;
  profiler::start(dir / "args.json");
  {
    profiler::scope s(profiler::track::host_compile(), "compile", {{"graph hash", "0x1234"}, {"nodes", "17"}});
    s.add_arg("cache", "miss");
  }
  {
    std::string hash = "0xabcd"; // an argument built at run time, gone before the scope ends
    profiler::scope s("built", {{"hash", hash}});
    hash = "changed";
  }
  const auto now = std::chrono::steady_clock::now();
  profiler::record(profiler::track::device(0), "execution", now, now + 1us, {{"graph hash", "0x1234"}});
  { profiler::scope s("plain"); }
  profiler::stop();

  const auto profile = read_profile(dir / "args.json");
  CHECK(the_event(profile, "compile")["args"] == json{{"graph hash", "0x1234"}, {"nodes", "17"}, {"cache", "miss"}});
  CHECK(the_event(profile, "built")["args"] == json{{"hash", "0xabcd"}});
  CHECK(the_event(profile, "execution")["args"] == json{{"graph hash", "0x1234"}});
  CHECK_FALSE(the_event(profile, "plain").contains("args"));
}

TEST_CASE("profiler: names with quotes, control characters and unicode survive the round trip", "[profiler]") {
  temp_dir dir;
  stop_at_end guard;
  const std::vector<std::string> names = {"say \"hi\"",
                                          "back\\slash",
                                          "two\nlines\r\n",
                                          "tab\there",
                                          std::string("nul\0byte", 8),
                                          "\x01\x1f\x7f",
                                          "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x9a\x80",
                                          "</script>",
                                          ""};
  profiler::start(dir / "strings.json");
  for (const auto& name : names) profiler::scope s(name, {{name, name}});
  // Bytes that are not UTF-8 become U+FFFD instead of making the file unreadable.
  {
    profiler::scope s("bad \xff"
                      " byte, cut \xe4\xb8, overlong \xc0\xaf, surrogate \xed\xa0\x80");
  }
  profiler::stop();

  const auto profile = read_profile(dir / "strings.json");
  for (const auto& name : names) {
    INFO("name " << json(name).dump());
    const auto event = the_event(profile, name);
    CHECK(event["args"][name] == name);
  }
  CHECK(events_named(profile, "bad \xef\xbf\xbd"
                              " byte, cut \xef\xbf\xbd\xef\xbf\xbd, overlong "
                              "\xef\xbf\xbd\xef\xbf\xbd, surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd")
            .size() == 1);
}

TEST_CASE("profiler: start while recording is a value_error naming both files", "[profiler]") {
  temp_dir dir;
  stop_at_end guard;
  profiler::start(dir / "first.json");
  { profiler::scope s("kept"); }
  CHECK_THROWS_AS(profiler::start(dir / "second.json"), xlite::value_error);
  CHECK_THROWS_WITH(profiler::start(dir / "second.json"), Contains("second.json") && Contains("first.json"));
  CHECK(profiler::active()); // the first session goes on
  CHECK_FALSE(fs::exists(dir / "second.json"));
  profiler::stop();
  CHECK(the_event(read_profile(dir / "first.json"), "kept")["ph"] == "X");
}

TEST_CASE("profiler: a path that cannot be written fails at start with an io_error naming it", "[profiler]") {
  temp_dir dir;
  stop_at_end guard;
  std::ofstream(dir / "regular_file") << "not a directory";
  const auto bad = dir / "regular_file" / "profile.json";
  CHECK_THROWS_AS(profiler::start(bad), xlite::io_error);
  CHECK_THROWS_WITH(profiler::start(bad), Contains(bad.string()));
  CHECK_THROWS_WITH(profiler::start(dir / "missing" / "profile.json"), Contains("missing/profile.json"));
  CHECK_FALSE(profiler::active());
  profiler::start(dir / "good.json"); // nothing was left half-started
  profiler::stop();
  CHECK(fs::exists(dir / "good.json"));
}

TEST_CASE("profiler: start creates the file at once, stop replaces it whole", "[profiler]") {
  temp_dir dir;
  stop_at_end guard;
  std::ofstream(dir / "old.json") << "old content";
  profiler::start(dir / "old.json");
  CHECK(fs::exists(dir / "old.json"));
  CHECK(fs::file_size(dir / "old.json") == 0);
  { profiler::scope s("new"); }
  profiler::stop();
  CHECK(events_named(read_profile(dir / "old.json"), "new").size() == 1);
  // Only the profile is left: the temporary file was renamed over it.
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("profiler: a profile that cannot be written at stop is an io_error, and the profiler stops", "[profiler]") {
  temp_dir dir;
  stop_at_end guard;
  fs::create_directories(dir / "gone");
  profiler::start(dir / "gone" / "profile.json");
  { profiler::scope s("lost"); }
  fs::remove_all(dir / "gone");
  CHECK_THROWS_AS(profiler::stop(), xlite::io_error);
  CHECK_FALSE(profiler::active());
  CHECK_NOTHROW(profiler::stop());
  fs::create_directories(dir / "gone");
  profiler::start(dir / "gone" / "profile.json");
  fs::remove_all(dir / "gone");
  CHECK_THROWS_WITH(profiler::stop(), Contains((dir / "gone" / "profile.json").string()));
}

TEST_CASE("profiler: stop without start does nothing", "[profiler]") {
  temp_dir dir;
  CHECK_FALSE(profiler::active());
  CHECK_NOTHROW(profiler::stop());
  CHECK_NOTHROW(profiler::stop());
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("profiler: events while not recording are dropped, a second session starts fresh", "[profiler]") {
  temp_dir dir;
  stop_at_end guard;
  // Arguments are evaluated in no fixed order, so a time is read before each call.
  auto now = std::chrono::steady_clock::now();
  { profiler::scope s("before any session"); }
  profiler::record(profiler::track::user(), "recorded before any session", now, now);

  profiler::start(dir / "first.json");
  { profiler::scope s("first session"); }
  profiler::stop();
  { profiler::scope s("between sessions"); }
  now = std::chrono::steady_clock::now();
  profiler::record(profiler::track::user(), "recorded between sessions", now, now);
  auto opened_between = std::make_unique<profiler::scope>("opened between sessions");

  profiler::start(dir / "second.json");
  opened_between.reset(); // closes while recording, but opened while not: not recorded
  { profiler::scope s("second session"); }
  profiler::stop();

  const auto first = read_profile(dir / "first.json"), second = read_profile(dir / "second.json");
  CHECK(complete_events(first).size() == 1);
  CHECK(the_event(first, "first session")["ph"] == "X");
  CHECK(complete_events(second).size() == 1);
  CHECK(the_event(second, "second session")["ph"] == "X");
  // The second session's clock starts again at its own start().
  CHECK(nanoseconds(the_event(second, "second session")["ts"]) < 1'000'000'000);
}

// XLITE_PROFILE: this case runs in a process with XLITE_PROFILE set (tests/runtime/CMakeLists.txt)
// and does not stop the profiler; the file is written at exit and read by the next case.
TEST_CASE("XLITE_PROFILE records from static initialisation and writes at exit", "[.xlite_profile_write]") {
  const auto path = xlite::env_string("XLITE_PROFILE");
  REQUIRE(path);
  REQUIRE(profiler::active());
  CHECK(fs::exists(*path));
  CHECK(fs::file_size(*path) == 0); // created at start, written only at exit
  CHECK_THROWS_WITH(profiler::start(*path), Contains("XLITE_PROFILE"));
  {
    profiler::scope s("main thread scope", {{"from", "XLITE_PROFILE"}});
    std::thread([] { profiler::scope t(profiler::track::device(0), "worker thread scope"); }).join();
  }
}

TEST_CASE("XLITE_PROFILE's file, read after its process exited", "[.xlite_profile_read]") {
  const auto path = xlite::env_string("XLITE_TEST_PROFILE_FILE");
  REQUIRE(path);
  CHECK_FALSE(profiler::active());
  const auto profile = read_profile(*path);
  const auto scope = the_event(profile, "main thread scope");
  CHECK(scope["args"]["from"] == "XLITE_PROFILE");
  CHECK(track_of(profile, scope) == "user");
  const auto worker = the_event(profile, "worker thread scope");
  CHECK(track_of(profile, worker) == "device cpu:0");
  // The worker's scope ran inside the main thread's, on another row.
  CHECK(nanoseconds(scope["ts"]) <= nanoseconds(worker["ts"]));
  CHECK(nanoseconds(worker["ts"]) + nanoseconds(worker["dur"]) <= nanoseconds(scope["ts"]) + nanoseconds(scope["dur"]));
}

TEST_CASE("XLITE_PROFILE that cannot be created warns and the program runs unprofiled", "[.xlite_profile_unwritable]") {
  REQUIRE(xlite::env_string("XLITE_PROFILE"));
  CHECK_FALSE(profiler::active());
  temp_dir dir;
  profiler::start(dir / "explicit.json"); // the program can still profile itself
  profiler::stop();
  CHECK(fs::exists(dir / "explicit.json"));
}

TEST_CASE("XLITE_PROFILE that cannot be written at exit warns without throwing", "[.xlite_profile_vanishing]") {
  const auto path = xlite::env_string("XLITE_PROFILE");
  REQUIRE(path);
  REQUIRE(profiler::active());
  { profiler::scope s("lost"); }
  fs::remove_all(fs::path(*path).parent_path());
}
