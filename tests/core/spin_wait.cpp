#include <xlite/core/spin_wait.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

using namespace std::chrono_literals;

TEST_CASE("wait_for_change returns the new value at once when it has already changed", "[spin_wait]") {
  std::atomic<std::uint32_t> value{5};
  xlite::detail::sleepers asleep;
  CHECK(xlite::detail::wait_for_change(value, std::uint32_t{4}, asleep, 0us) == 5);
}

// Both threads go to sleep at once (no spin, no nap), so every hand-over goes through
// sleepers: a lost wake-up would hang the test, which CTest's timeout then fails.
TEST_CASE("threads asleep on a value wake for every change: no wake-up is lost", "[spin_wait]") {
  std::atomic<std::int64_t> turn{0}; // even: the main thread's move, odd: the other's
  xlite::detail::sleepers asleep;
  constexpr std::int64_t moves = 20000;
  std::thread other([&] {
    for (std::int64_t t = 1; t < moves; t += 2) {
      for (auto now = turn.load(); now != t;) now = xlite::detail::wait_for_change(turn, now, asleep, 0us);
      turn.store(t + 1);
      asleep.wake_all();
    }
  });
  for (std::int64_t t = 0; t < moves; t += 2) {
    for (auto now = turn.load(); now != t;) now = xlite::detail::wait_for_change(turn, now, asleep, 0us);
    turn.store(t + 1);
    asleep.wake_all();
  }
  other.join();
  CHECK(turn.load() == moves);
}

TEST_CASE("a wake_all with no thread asleep leaves the next sleeper waiting for its own change", "[spin_wait]") {
  std::atomic<std::uint8_t> state{0};
  xlite::detail::sleepers asleep;
  asleep.wake_all(); // nobody sleeps: nothing to do
  std::atomic<bool> woke{false};
  std::thread waiter([&] {
    CHECK(xlite::detail::wait_for_change(state, std::uint8_t{0}, asleep, 0us, 0us) == 2);
    woke.store(true);
  });
  std::this_thread::sleep_for(20ms);
  asleep.wake_all(); // no change yet: a waiter that wakes goes back to sleep
  std::this_thread::sleep_for(20ms);
  CHECK_FALSE(woke.load());
  state.store(2);
  asleep.wake_all();
  waiter.join();
  CHECK(woke.load());
}
