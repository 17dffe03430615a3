#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

// Device ids 0 to n - 1, in order: the ids of a mesh or tile assignment over every device.
inline std::vector<std::int64_t> iota_ids(std::int64_t n) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

// The 8 devices of spmd_tests.
inline const std::vector<std::int64_t> eight = iota_ids(8);
