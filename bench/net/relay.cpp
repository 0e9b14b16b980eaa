// bench/net/relay.cpp (to be written)
#include "cases.hpp"

namespace net_bench {
void run_relay(const options&) {}
} // namespace net_bench
