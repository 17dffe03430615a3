// A process killed in the middle of a save leaves the previous checkpoint whole under its
// name: the new one is written under a temporary name and only renamed once synced.

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "io_check.hpp"
#include "xlite/io/safetensors.hpp"

using xlite::tensor;
using xlite_test::scratch_directory;

namespace {

// The size of the save's temporary file in `dir`, or -1 when there is none.
std::intmax_t temporary_size(const std::filesystem::path& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().starts_with("ckpt.safetensors.tmp.")) {
      std::error_code gone; // the writer may rename it meanwhile
      const auto size = std::filesystem::file_size(entry.path(), gone);
      return gone ? -1 : static_cast<std::intmax_t>(size);
    }
  }
  return -1;
}

} // namespace

TEST_CASE("safetensors: a save killed midway leaves the previous checkpoint intact", "[io][crash]") {
  scratch_directory dir;
  const auto path = dir / "ckpt.safetensors";
  const tensor<float> previous{1, 2, 3};
  xlite::save(path, {{"w", previous}}, {{"step", "1"}});
  const tensor<float> next(xlite::shape{32 << 20}, 0.25f); // 128 MiB: long enough to be caught writing

  bool killed_midway = false;
  for (int attempt = 0; attempt < 5 && !killed_midway; ++attempt) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      try {
        xlite::save(path, {{"w", next}}, {{"step", "2"}});
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (temporary_size(dir.path()) < (1 << 20) && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(child, &status, WNOHANG) == child) break; // finished before it was caught
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);

    killed_midway = temporary_size(dir.path()) >= 0;
    const auto loaded = xlite::load(path);
    if (killed_midway) {
      CHECK(loaded.at("w").get<float>() == previous);
      CHECK(xlite::load_metadata(path).at("step") == "1");
    } else { // the child won the race and committed: the file is the new one, whole
      CHECK(loaded.at("w").get<float>() == next);
      xlite::save(path, {{"w", previous}}, {{"step", "1"}});
    }
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
      if (entry.path() != path) std::filesystem::remove(entry.path());
    }
  }
  CHECK(killed_midway);
}
