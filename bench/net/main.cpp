// bench/net/main.cpp: net_bench, the egress proxy's figures against same-run baselines.
//   net_bench [--quick] [--case decision|resolver|relay|setup|tls|inspect]
#include "cases.hpp"

#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv)
{
    net_bench::options o;
    for (int i = 1; i < argc; ++i)
    {
        if (std::strcmp(argv[i], "--quick") == 0)
            o.quick = true;
        else if (std::strcmp(argv[i], "--case") == 0 && i + 1 < argc)
            o.only = argv[++i];
        else
        {
            std::fprintf(
                stderr,
                "usage: net_bench [--quick] [--case decision|resolver|relay|setup|tls|inspect]\n");
            return 2;
        }
    }
    if (o.only.empty() || o.only == "decision")
        net_bench::run_decision(o);
    if (o.only.empty() || o.only == "resolver")
        net_bench::run_resolver(o);
    if (o.only.empty() || o.only == "relay")
        net_bench::run_relay(o);
    if (o.only == "setup") // the relay's setup figures alone (for profiling the setup)
        net_bench::run_setup_only(o);
    if (o.only.empty() || o.only == "tls")
        net_bench::run_tls(o);
    if (o.only.empty() || o.only == "inspect")
        net_bench::run_inspect(o);
    return 0;
}
