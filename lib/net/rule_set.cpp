// lib/net/rule_set.cpp: see rule_set.hpp.
#include "rule_set.hpp"

namespace sandbox::net {
} // namespace sandbox::net
