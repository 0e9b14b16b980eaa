// lib/net/proxy.cpp: see proxy.hpp.
#include "proxy.hpp"

namespace sandbox::net {
} // namespace sandbox::net
