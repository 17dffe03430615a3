#pragma once

// SPMD: device meshes, partition specs and the shardings they give tensors (GSPMD's
// annotations, as torch_xla.distributed.spmd has them).

#include "xlite/ir/sharding.hpp"
#include "xlite/spmd/mesh.hpp"
#include "xlite/spmd/partition_spec.hpp"
#include "xlite/spmd/visualize.hpp"
