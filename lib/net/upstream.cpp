// lib/net/upstream.cpp
#include "egress.hpp"

namespace sandbox::net {
} // namespace sandbox::net
