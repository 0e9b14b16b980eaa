// lib/net/relay.cpp
#include "relay.hpp"

namespace sandbox::net {
} // namespace sandbox::net
