#include <xlite/core/thread_pool.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

using Catch::Matchers::Contains;

TEST_CASE("parallel_for visits every index exactly once", "[thread_pool][property]") {
  std::mt19937 rng(7);
  for (const std::size_t threads : {1u, 2u, 3u, 5u}) {
    xlite::thread_pool pool(threads);
    CHECK(pool.num_threads() == threads);
    for (int trial = 0; trial < 50; ++trial) {
      const std::int64_t count = std::uniform_int_distribution<std::int64_t>(0, 5000)(rng);
      const std::int64_t grain = std::uniform_int_distribution<std::int64_t>(1, 700)(rng);
      std::vector<std::atomic<int>> visits(static_cast<std::size_t>(count));
      pool.parallel_for(count, grain, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) visits[static_cast<std::size_t>(i)].fetch_add(1);
      });
      INFO(threads << " threads, count " << count << ", grain " << grain);
      for (const auto &v : visits) REQUIRE(v.load() == 1);
    }
  }
}

TEST_CASE("chunks depend on count and grain only, so chunked sums are bitwise reproducible", "[thread_pool]") {
  std::mt19937 rng(11);
  std::vector<float> values(100003);
  for (auto &v : values) v = std::uniform_real_distribution<float>(-1e3f, 1e3f)(rng);
  const std::int64_t grain = 4096;
  const auto chunks = static_cast<std::size_t>((values.size() + grain - 1) / grain);

  auto chunked_sum = [&](xlite::thread_pool &pool, std::vector<std::pair<std::int64_t, std::int64_t>> &ranges) {
    std::vector<float> partial(chunks);
    std::mutex m;
    pool.parallel_for(static_cast<std::int64_t>(values.size()), grain, [&](std::int64_t begin, std::int64_t end) {
      float s = 0;
      for (std::int64_t i = begin; i < end; ++i) s += values[static_cast<std::size_t>(i)];
      partial[static_cast<std::size_t>(begin / grain)] = s;
      std::scoped_lock lock(m);
      ranges.emplace_back(begin, end);
    });
    float total = 0;
    for (const float p : partial) total += p;
    return total;
  };

  xlite::thread_pool serial(1);
  std::vector<std::pair<std::int64_t, std::int64_t>> serial_ranges;
  const float expected = chunked_sum(serial, serial_ranges);
  CHECK(serial_ranges.size() == chunks);
  for (const std::size_t threads : {2u, 3u, 8u}) {
    xlite::thread_pool pool(threads);
    for (int repeat = 0; repeat < 5; ++repeat) {
      std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
      CHECK(chunked_sum(pool, ranges) == expected); // bitwise, not approximately
      std::sort(ranges.begin(), ranges.end());
      CHECK(ranges == serial_ranges);
    }
  }
}

TEST_CASE("work really spreads over the pool's threads", "[thread_pool]") {
  xlite::thread_pool pool(2);
  std::mutex m;
  std::vector<std::thread::id> ids;
  std::atomic<int> arrived{0};
  // Two chunks that each wait for the other: this finishes only if two threads run them.
  pool.parallel_for(2, 1, [&](std::int64_t, std::int64_t) {
    {
      std::scoped_lock lock(m);
      ids.push_back(std::this_thread::get_id());
    }
    arrived.fetch_add(1);
    while (arrived.load() < 2) std::this_thread::yield();
  });
  REQUIRE(ids.size() == 2);
  CHECK(ids[0] != ids[1]);
}

// Two chunks that wait for each other, so that both threads run one; each records the
// address of the body object its thread called.
template <class Payload>
struct address_recorder {
  Payload payload{};
  std::mutex* m;
  std::vector<std::pair<std::thread::id, const void*>>* called;
  std::atomic<int>* arrived;

  void operator()(std::int64_t, std::int64_t) const {
    {
      std::scoped_lock lock(*m);
      called->emplace_back(std::this_thread::get_id(), this);
    }
    arrived->fetch_add(1);
    while (arrived->load() < 2) std::this_thread::yield();
  }
};

// Whether the worker called a copy of body (the calling thread always calls body itself).
template <class Body, class... Tag>
bool worker_called_a_copy(xlite::thread_pool& pool, const Body& body, Tag... may_copy) {
  body.arrived->store(0);
  body.called->clear();
  pool.parallel_for(2, 1, body, may_copy...);
  REQUIRE(body.called->size() == 2);
  const std::thread::id caller = std::this_thread::get_id();
  for (const auto& [thread, self] : *body.called) {
    if (thread == caller) CHECK(self == &body);
  }
  return (*body.called)[0].second != (*body.called)[1].second;
}

// Workers call a copy in the pool's own cache lines, so that they leave no line of the
// caller's stack in their caches: only when asked to, and when the body fits.
TEST_CASE("workers call a copy of the body only given workers_may_copy and a body that fits", "[thread_pool]") {
  xlite::thread_pool pool(2);
  std::mutex m;
  std::vector<std::pair<std::thread::id, const void*>> called;
  std::atomic<int> arrived{0};
  const address_recorder<std::array<char, 64>> small{{}, &m, &called, &arrived};
  CHECK(worker_called_a_copy(pool, small, xlite::thread_pool::workers_may_copy));
  CHECK_FALSE(worker_called_a_copy(pool, small));
  const address_recorder<std::array<char, 4096>> large{{}, &m, &called, &arrived};
  CHECK_FALSE(worker_called_a_copy(pool, large, xlite::thread_pool::workers_may_copy));
  const address_recorder<std::string> not_trivially_copied{"a string", &m, &called, &arrived};
  CHECK_FALSE(worker_called_a_copy(pool, not_trivially_copied)); // with workers_may_copy: a static_assert
}

// The pool keeps its copy of a body from one job to the next where the body is the same, so
// the workers must see every change: here one in the last byte of a large body (no padding,
// so equal bodies are equal in every byte), and back. Two chunks that wait for each other,
// so that the worker runs one of them, each reporting what its thread's body holds. A body
// of another type with the same bytes must run as that type; it would with or without the
// pool's check of the type (each job calls its own type's code), which is there for the
// object model, not for what a test can see.
template <int Factor>
struct byte_reporter {
  std::array<int, 2>* seen;
  std::atomic<int>* arrived;
  std::array<unsigned char, 304> payload{};

  void operator()(std::int64_t begin, std::int64_t) const {
    (*seen)[static_cast<std::size_t>(begin)] = Factor * payload.back();
    arrived->fetch_add(1);
    while (arrived->load() < 2) std::this_thread::yield();
  }
};

static_assert(std::has_unique_object_representations_v<byte_reporter<1>> &&
              offsetof(byte_reporter<1>, payload) + sizeof(byte_reporter<1>::payload) == sizeof(byte_reporter<1>));

TEST_CASE("workers see each job's body, however little it differs from the last job's", "[thread_pool]") {
  xlite::thread_pool pool(2);
  std::array<int, 2> seen{};
  std::atomic<int> arrived{0};
  const auto run = [&](const auto& body) {
    arrived.store(0);
    seen = {};
    pool.parallel_for(2, 1, body, xlite::thread_pool::workers_may_copy);
    return seen;
  };
  byte_reporter<1> body{&seen, &arrived};
  for (const unsigned char last : {1, 1, 2, 2, 1}) {
    body.payload.back() = last;
    CHECK(run(body) == std::array<int, 2>{last, last});
  }
  const byte_reporter<10> same_bytes{&seen, &arrived, body.payload};
  CHECK(run(same_bytes) == std::array<int, 2>{10, 10});
  CHECK(run(body) == std::array<int, 2>{1, 1});
  // A job that calls the body in place leaves the copy as it was, for the next that copies.
  body.payload.back() = 3;
  arrived.store(0);
  pool.parallel_for(2, 1, body);
  CHECK(seen == std::array<int, 2>{3, 3});
  for (const unsigned char last : {1, 3}) {
    body.payload.back() = last;
    CHECK(run(body) == std::array<int, 2>{last, last});
  }
}

// A thread that has run its share helps with the shares of threads still busy: here the
// chunk that takes long holds one thread, and the other runs the chunk after it.
TEST_CASE("a thread busy with a long chunk gets help with the rest of its share", "[thread_pool]") {
  xlite::thread_pool pool(2);
  for (int repeat = 0; repeat < 5; ++repeat) {
    std::array<std::thread::id, 4> ran_on{};
    pool.parallel_for(4, 1, [&](std::int64_t begin, std::int64_t) {
      ran_on[static_cast<std::size_t>(begin)] = std::this_thread::get_id();
      if (begin == 2) std::this_thread::sleep_for(std::chrono::milliseconds(20)); // the second share's first chunk
    });
    CHECK(ran_on[2] != ran_on[3]);
  }
}

TEST_CASE("an exception in a chunk reaches the caller and the pool stays usable", "[thread_pool]") {
  auto fail_at_10 = [](std::atomic<int> &ran) {
    return [&ran](std::int64_t begin, std::int64_t) {
      ran.fetch_add(1);
      if (begin == 10) throw std::runtime_error("chunk 10 failed");
    };
  };
  {
    // On one thread chunks run in order, so exactly the chunks after the failure are skipped.
    xlite::thread_pool serial(1);
    std::atomic<int> ran{0};
    CHECK_THROWS_WITH(serial.parallel_for(1000, 1, fail_at_10(ran)), "chunk 10 failed");
    CHECK(ran.load() == 11);
  }
  xlite::thread_pool pool(3);
  for (int repeat = 0; repeat < 20; ++repeat) {
    std::atomic<int> ran{0};
    CHECK_THROWS_WITH(pool.parallel_for(1000, 1, fail_at_10(ran)), "chunk 10 failed");
    std::atomic<std::int64_t> sum{0};
    pool.parallel_for(100, 7, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) sum.fetch_add(i);
    });
    CHECK(sum.load() == 4950);
  }
}

// Jobs of a few chunks back to back, some fewer than the threads, some failing, some chunks
// yielding their core: the case where a worker that read one job is still claiming when
// the next is posted. No chunk may run twice, run outside its own job, or be missed.
TEST_CASE("back-to-back small jobs each run every chunk once", "[thread_pool][property]") {
  std::mt19937 rng(19);
  for (const std::size_t threads : {2u, 3u, 8u}) { // 8: more threads than cores
    xlite::thread_pool pool(threads);
    std::vector<std::atomic<int>> visits(64);
    std::atomic<int> live{-1}; // the job parallel_for is running, -1 between jobs
    std::atomic<int> stray{0}; // chunks run outside their job
    std::atomic<int> off_caller{0};
    const std::thread::id caller = std::this_thread::get_id();
    for (int job = 0; job < 20000; ++job) {
      const std::int64_t count = std::uniform_int_distribution<std::int64_t>(2, 64)(rng);
      const std::int64_t grain = std::uniform_int_distribution<std::int64_t>(1, 8)(rng);
      const bool fails = job % 97 == 0;
      for (auto& v : visits) v.store(0, std::memory_order_relaxed);
      const auto body = [&, job](std::int64_t begin, std::int64_t end) {
        if (live.load() != job) stray.fetch_add(1);
        if (std::this_thread::get_id() != caller) off_caller.fetch_add(1, std::memory_order_relaxed);
        for (std::int64_t i = begin; i < end; ++i) visits[static_cast<std::size_t>(i)].fetch_add(1);
        if ((job + begin) % 4 == 0) std::this_thread::yield();
        if (fails && begin == 0) throw std::runtime_error("job " + std::to_string(job));
      };
      INFO(threads << " threads, job " << job << ", count " << count << ", grain " << grain);
      live.store(job);
      if (fails) {
        REQUIRE_THROWS_WITH(pool.parallel_for(count, grain, body), "job " + std::to_string(job));
        REQUIRE(visits[0].load() == 1);
        for (std::int64_t i = 0; i < 64; ++i)
          REQUIRE(visits[static_cast<std::size_t>(i)].load() <= (i < count ? 1 : 0));
      } else {
        pool.parallel_for(count, grain, body);
        for (std::int64_t i = 0; i < 64; ++i)
          REQUIRE(visits[static_cast<std::size_t>(i)].load() == (i < count ? 1 : 0));
      }
      live.store(-1);
    }
    CHECK(stray.load() == 0);
    CHECK(off_caller.load() > 0); // the workers took part
  }
}

TEST_CASE("nested parallel_for runs serially instead of deadlocking", "[thread_pool]") {
  xlite::thread_pool pool(2);
  std::atomic<std::int64_t> sum{0};
  pool.parallel_for(8, 1, [&](std::int64_t, std::int64_t) {
    pool.parallel_for(100, 10, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) sum.fetch_add(i);
    });
  });
  CHECK(sum.load() == 8 * 4950);
}

TEST_CASE("parallel_for from several threads at once on one pool", "[thread_pool]") {
  xlite::thread_pool pool(3);
  std::atomic<std::int64_t> sum{0};
  std::vector<std::thread> callers;
  std::atomic<std::int64_t> expected{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < 2000; ++r) { // small jobs back to back, each caller its own sizes
        const std::int64_t count = 3 + (r * 7 + c) % 40;
        pool.parallel_for(count, 1 + (r + c) % 4, [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t i = begin; i < end; ++i) sum.fetch_add(i);
        });
        expected.fetch_add(count * (count - 1) / 2);
      }
    });
  }
  for (auto &t : callers) t.join();
  CHECK(sum.load() == expected.load());
}

TEST_CASE("bad arguments are value_errors", "[thread_pool]") {
  CHECK_THROWS_AS(xlite::thread_pool(0), xlite::value_error);
  xlite::thread_pool pool(2);
  CHECK_THROWS_WITH(pool.parallel_for(10, 0, [](std::int64_t, std::int64_t) {}),
                    Contains("grain must be at least 1, got 0"));
  // Shares count chunks in 32 bits; the limit holds on every pool, so that code does not
  // work on one thread and fail on two.
  xlite::thread_pool serial(1);
  for (xlite::thread_pool* p : {&pool, &serial}) {
    CHECK_THROWS_WITH(p->parallel_for(std::int64_t{1} << 33, 1, [](std::int64_t, std::int64_t) {}),
                      Contains("8589934592 elements in chunks of 1 make 8589934592 chunks") &&
                          Contains("take a larger grain"));
  }
  int calls = 0;
  pool.parallel_for(0, 1, [&](std::int64_t, std::int64_t) { ++calls; });
  pool.parallel_for(-5, 1, [&](std::int64_t, std::int64_t) { ++calls; });
  CHECK(calls == 0);
}

TEST_CASE("XLITE_NUM_THREADS=3", "[.xlite_num_threads]") { CHECK(xlite::default_thread_pool().num_threads() == 3); }

TEST_CASE("scoped_thread_pool installs a pool for this thread's kernels and restores the previous one",
          "[thread_pool]") {
  xlite::thread_pool &before = xlite::current_thread_pool();
  CHECK(&before == &xlite::default_thread_pool());
  xlite::thread_pool one(1);
  {
    xlite::scoped_thread_pool use(one);
    CHECK(&xlite::current_thread_pool() == &one);
    xlite::thread_pool three(3);
    {
      xlite::scoped_thread_pool nested(three);
      CHECK(&xlite::current_thread_pool() == &three);
      std::thread other([&] { CHECK(&xlite::current_thread_pool() == &xlite::default_thread_pool()); });
      other.join();
    }
    CHECK(&xlite::current_thread_pool() == &one);
  }
  CHECK(&xlite::current_thread_pool() == &before);
}
