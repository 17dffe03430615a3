#pragma once

// Fashion-MNIST (Zalando's drop-in replacement for MNIST): 28x28 grey images of clothes in
// ten classes, 60000 for training and 10000 for testing, read from the four IDX files that
// Debian's dataset-fashion-mnist package installs.

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "xlite/core/error.hpp"
#include "xlite/data/idx.hpp"
#include "xlite/expr/tensor.hpp"

namespace xlite::data {

enum class split { train, test };

// Where dataset-fashion-mnist puts the files.
inline constexpr std::string_view fashion_mnist_directory = "/usr/share/datasets/fashion-mnist";

// The names of labels 0 to 9.
inline constexpr std::array<std::string_view, 10> fashion_mnist_classes{
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

struct fashion_mnist {
  xlite::tensor<float> images;        // (N, 28, 28), pixels scaled from 0..255 to [0, 1]
  xlite::tensor<std::int64_t> labels; // (N,), each in 0..9: an index into fashion_mnist_classes
};

namespace detail {

inline std::filesystem::path fashion_mnist_file(const std::filesystem::path& directory, split s,
                                                std::string_view kind) {
  const std::filesystem::path file =
      directory / (std::string(s == split::train ? "train" : "t10k") + "-" + std::string(kind) + "-ubyte.gz");
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    throw io_error(xlite::detail::message("load_fashion_mnist: ", file.string(), " does not exist; install the ",
                                          "Debian package dataset-fashion-mnist (scripts/install-deps.sh does), ",
                                          "or pass the directory that holds the four files"));
  }
  return file;
}

} // namespace detail

// One split of Fashion-MNIST. The images are converted to float here, once, so a training
// loop feeds them to the loader (data/loader.hpp) as they are. Throws io_error for a missing
// or unreadable file and format_error for contents that are not Fashion-MNIST's.
inline fashion_mnist load_fashion_mnist(split s, const std::filesystem::path& directory = fashion_mnist_directory) {
  const auto images_file = detail::fashion_mnist_file(directory, s, "images-idx3");
  const auto labels_file = detail::fashion_mnist_file(directory, s, "labels-idx1");
  const xlite::tensor<std::uint8_t> pixels = read_idx(images_file);
  const xlite::tensor<std::uint8_t> classes = read_idx(labels_file);

  const auto fail = [](const std::filesystem::path& file, auto&&... parts) {
    throw format_error(xlite::detail::message("load_fashion_mnist: ", file.string(), ": ", parts...));
  };
  if (pixels.rank() != 3 || pixels.shape()[1] != 28 || pixels.shape()[2] != 28) {
    fail(images_file, "images of shape ", pixels.shape(), ", not (N, 28, 28)");
  }
  if (classes.rank() != 1) fail(labels_file, "labels of shape ", classes.shape(), ", not (N,)");
  if (classes.size() != pixels.shape()[0]) {
    fail(labels_file, classes.size(), " labels for the ", pixels.shape()[0], " images of ", images_file.string());
  }
  if (const auto* bad = std::find_if(classes.begin(), classes.end(), [](std::uint8_t c) { return c > 9; });
      bad != classes.end()) {
    fail(labels_file, "label ", bad - classes.begin(), " is ", int{*bad}, ", not a class in 0..9");
  }

  fashion_mnist result{xlite::tensor<float>(xlite::tensor<float>::uninitialized, pixels.shape()),
                       xlite::tensor<std::int64_t>(xlite::tensor<std::int64_t>::uninitialized, classes.shape())};
  std::transform(pixels.begin(), pixels.end(), result.images.begin(),
                 [](std::uint8_t p) { return static_cast<float>(p) / 255.0f; });
  std::copy(classes.begin(), classes.end(), result.labels.begin());
  return result;
}

} // namespace xlite::data
