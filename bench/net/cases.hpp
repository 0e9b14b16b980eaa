// bench/net/cases.hpp: the cases of net_bench, one file each. Every case prints one JSON line
// per figure (bench/common.hpp print_json) with its baseline measured in the same run.
#ifndef SANDBOX_BENCH_NET_CASES_HPP
#define SANDBOX_BENCH_NET_CASES_HPP

#include <string>

namespace net_bench {

struct options
{
    bool quick = false; ///< tiny sizes: the smoke test (figures ignored)
    std::string only{}; ///< run only this case ("" = all)
};

/// Decision cost at 1,000 rules against a linear scan of the same rules (bench/net/decision.cpp).
void run_decision(const options& o);
/// 100 parallel slow lookups against one lookup (bench/net/resolver.cpp).
void run_resolver(const options& o);
/// Tunnel throughput, relay cpu per GiB, setup latency, idle and stalled tunnel memory, 4,000 idle
/// tunnels, and the caller's loop stall while a tunnel streams (bench/net/relay.cpp).
void run_relay(const options& o);
/// Only the setup figures of `run_relay` (`--case setup`; for profiling a setup).
void run_setup_only(const options& o);
/// TLS inspection's tunnels against the plain CONNECT tunnel: setup latency and proxy cpu,
/// throughput, idle memory (bench/net/inspect.cpp).
void run_inspect(const options& o);
/// TLS inspection's leaf mint against a straightforward OpenSSL mint, and a cache hit against
/// a miss (bench/net/tls.cpp).
void run_tls(const options& o);

} // namespace net_bench

#endif // SANDBOX_BENCH_NET_CASES_HPP
