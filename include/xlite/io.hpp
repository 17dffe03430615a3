#pragma once

// Saving and loading tensors: safetensors files (save, load, load_metadata) for host and
// lazy tensors of every dtype, and NumPy's .npy files (save_npy, load_npy). Both write
// atomically and validate what they read.

#include "xlite/io/any_tensor.hpp"
#include "xlite/io/npy.hpp"
#include "xlite/io/safetensors.hpp"
