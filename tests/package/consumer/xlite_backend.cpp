// xlite's backend, compiled once for the program (see the README's "Compile time").
#include <xlite/backend_source.hpp>
