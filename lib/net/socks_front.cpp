// lib/net/socks_front.cpp
#include "socks_front.hpp"

namespace sandbox::net {
} // namespace sandbox::net
