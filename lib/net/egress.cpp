// lib/net/egress.cpp: see egress.hpp.
#include "egress.hpp"

namespace sandbox::net {
} // namespace sandbox::net
