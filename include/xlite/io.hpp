#pragma once

// Saving and loading tensors: safetensors files (save, load, load_metadata) for host and
// lazy tensors of every dtype, NumPy's .npy and .npz files (save_npy, load_npy, save_npz,
// load_npz; deflated archives need the xlite::zlib component), and sharded
// checkpoints (save_sharded, load_sharded, consolidate). Every writer is atomic and every
// reader validates what it reads (docs/io.md).

#include "xlite/io/any_tensor.hpp"
#include "xlite/io/checkpoint.hpp"
#include "xlite/io/npy.hpp"
#include "xlite/io/npz.hpp"
#include "xlite/io/safetensors.hpp"
