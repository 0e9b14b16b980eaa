// bench/net/decision.cpp (to be written)
#include "cases.hpp"

namespace net_bench {
void run_decision(const options&) {}
} // namespace net_bench
