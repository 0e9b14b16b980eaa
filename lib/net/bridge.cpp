// lib/net/bridge.cpp: see bridge.hpp.
#include "bridge.hpp"

namespace sandbox::net {
} // namespace sandbox::net
