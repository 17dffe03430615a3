// xlite's backend, compiled once for the test programs (see tests/CMakeLists.txt).
#include "xlite/backend_source.hpp"
