// civetweb 1.15 from Debian's libcivetweb-dev (no pkg-config file; headers and library are on the default paths).
#include <civetweb.h>
