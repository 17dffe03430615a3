#pragma once

// The data layer: an in-memory loader that prefetches batches to a device and marks steps
// (always), and the IDX reader and Fashion-MNIST (with the xlite::zlib component).
//
// The readers need zlib at link time, so they come with the component that links it,
// which defines XLITE_HAS_ZLIB: what this header declares then depends on the link line,
// not on which headers happen to be installed, and xlite.hpp, which includes it, compiles
// and links without zlib. A program that links zlib another way can include
// xlite/data/idx.hpp and xlite/data/fashion_mnist.hpp directly.

#include "xlite/data/loader.hpp"

#if defined(XLITE_HAS_ZLIB)
#include "xlite/data/fashion_mnist.hpp"
#include "xlite/data/idx.hpp"
#endif
