// lib/net/host.cpp: see host.hpp.
#include "host.hpp"

namespace sandbox::net {
} // namespace sandbox::net
