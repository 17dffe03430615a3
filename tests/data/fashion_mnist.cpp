// Fashion-MNIST: the installed dataset (skipped with a warning where it is not installed),
// and small fake datasets for the loader's own checks.

#include "xlite/data/fashion_mnist.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "../thrown.hpp"
#include "idx_files.hpp"

using namespace xlite_test;
using Catch::Matchers::Contains;
namespace data = xlite::data;

namespace {

// The pixel as the file stores it.
std::int64_t byte_of(float pixel) { return std::lround(pixel * 255.0f); }

void write_fake(const temp_dir& dir, const std::string& prefix, std::vector<std::uint32_t> image_dims,
                const bytes& labels) {
  std::uint32_t pixels = 1;
  for (const auto d : image_dims) pixels *= d;
  bytes image_bytes(pixels);
  for (std::uint32_t i = 0; i < pixels; ++i) image_bytes[i] = static_cast<unsigned char>(i % 256);
  write_gz(dir / (prefix + "-images-idx3-ubyte.gz"), idx_bytes(0x08, image_dims, image_bytes));
  write_gz(dir / (prefix + "-labels-idx1-ubyte.gz"),
           idx_bytes(0x08, {static_cast<std::uint32_t>(labels.size())}, labels));
}

} // namespace

TEST_CASE("load_fashion_mnist reads both splits of the installed dataset", "[data][fashion_mnist]") {
  if (!std::filesystem::exists(data::fashion_mnist_directory)) {
    WARN("skipped: " << data::fashion_mnist_directory
                     << " does not exist (install dataset-fashion-mnist: scripts/install-deps.sh)");
    return;
  }
  struct expected {
    data::split split;
    std::int64_t count;
    std::int64_t first_image_sum; // of the first image's bytes
    std::int64_t all_pixels_sum;  // of every byte of the images
    std::array<std::int64_t, 10> first_labels;
  };
  // From Python's gzip module over the same files.
  const std::array<expected, 2> splits{
      expected{data::split::train, 60000, 76247, 3431114169, {9, 0, 0, 3, 0, 2, 7, 2, 5, 5}},
      expected{data::split::test, 10000, 33456, 573469082, {9, 2, 1, 1, 6, 1, 4, 6, 5, 7}}};
  for (const auto& e : splits) {
    INFO((e.split == data::split::train ? "train" : "test"));
    const data::fashion_mnist set = data::load_fashion_mnist(e.split);
    REQUIRE(set.images.shape() == xlite::shape{e.count, 28, 28});
    REQUIRE(set.labels.shape() == xlite::shape{e.count});

    std::array<std::int64_t, 10> per_class{};
    for (const auto label : set.labels) per_class.at(static_cast<std::size_t>(label))++;
    for (const auto n : per_class) CHECK(n == e.count / 10);
    CHECK(std::vector<std::int64_t>(set.labels.begin(), set.labels.begin() + 10) ==
          std::vector<std::int64_t>(e.first_labels.begin(), e.first_labels.end()));

    std::int64_t first = 0;
    std::int64_t all = 0;
    bool in_range = true;
    for (std::int64_t i = 0; i < set.images.size(); ++i) {
      const float p = set.images.data()[i];
      in_range = in_range && p >= 0.0f && p <= 1.0f;
      all += byte_of(p);
      if (i < 28 * 28) first += byte_of(p);
    }
    CHECK(in_range);
    CHECK(first == e.first_image_sum);
    CHECK(all == e.all_pixels_sum);
  }
  CHECK(data::fashion_mnist_classes[9] == "Ankle boot");
  CHECK(data::fashion_mnist_classes[0] == "T-shirt/top");
}

TEST_CASE("load_fashion_mnist: a missing file is an io_error that names it and the package", "[data][fashion_mnist]") {
  temp_dir dir;
  const std::string message =
      message_of<xlite::io_error>([&] { data::load_fashion_mnist(data::split::test, dir.path()); });
  CHECK_THAT(message, Contains((dir / "t10k-images-idx3-ubyte.gz").string()) && Contains("dataset-fashion-mnist") &&
                          Contains("scripts/install-deps.sh"));
}

TEST_CASE("load_fashion_mnist scales pixels to [0, 1] and checks counts, shapes and labels", "[data][fashion_mnist]") {
  temp_dir dir;
  write_fake(dir, "train", {3, 28, 28}, {0, 9, 4});
  const auto set = data::load_fashion_mnist(data::split::train, dir.path());
  CHECK(set.images.shape() == xlite::shape{3, 28, 28});
  CHECK(set.images.data()[0] == 0.0f);   // byte 0
  CHECK(set.images.data()[255] == 1.0f); // byte 255
  CHECK(set.images.data()[51] == 0.2f);  // byte 51 = 0.2 * 255, to the nearest float
  CHECK(std::vector<std::int64_t>(set.labels.begin(), set.labels.end()) == std::vector<std::int64_t>{0, 9, 4});

  const auto refused = [&](const char* fault) {
    CHECK_THAT(message_of<data::format_error>([&] { data::load_fashion_mnist(data::split::test, dir.path()); }),
               Contains("load_fashion_mnist: ") && Contains(fault));
  };
  write_fake(dir, "t10k", {3, 28, 28}, {0, 9});
  refused("t10k-labels-idx1-ubyte.gz: 2 labels for the 3 images");
  write_fake(dir, "t10k", {3, 28, 28}, {0, 10, 1});
  refused("label 1 is 10, not a class in 0..9");
  write_fake(dir, "t10k", {3, 28, 27}, {0, 1, 2});
  refused("images of shape (3, 28, 27), not (N, 28, 28)");
}
