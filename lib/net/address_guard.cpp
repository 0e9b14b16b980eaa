// lib/net/address_guard.cpp: see address_guard.hpp.
#include "address_guard.hpp"

namespace sandbox::net {
} // namespace sandbox::net
