// lib/net/http_front.cpp
#include "egress.hpp"

namespace sandbox::net {
} // namespace sandbox::net
