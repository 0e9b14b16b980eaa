// bench/net/resolver.cpp (to be written)
#include "cases.hpp"

namespace net_bench {
void run_resolver(const options&) {}
} // namespace net_bench
