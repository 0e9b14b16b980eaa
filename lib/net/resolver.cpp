// lib/net/resolver.cpp: see resolver.hpp.
#include "resolver.hpp"

namespace sandbox::net {
} // namespace sandbox::net
