#pragma once

// xlite's version. CMake parses these three lines, so keep them in this form.
#define XLITE_VERSION_MAJOR 0
#define XLITE_VERSION_MINOR 1
#define XLITE_VERSION_PATCH 0

#define XLITE_VERSION (XLITE_VERSION_MAJOR * 10000 + XLITE_VERSION_MINOR * 100 + XLITE_VERSION_PATCH)
