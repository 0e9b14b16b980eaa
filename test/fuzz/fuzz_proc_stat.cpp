// test/fuzz/fuzz_proc_stat.cpp: /proc text parsers never crash, and what they accept is sane.
#include "helper/proc.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string_view text(reinterpret_cast<const char*>(data), size);
    if (auto st = sandbox::detail::parse_proc_stat(text))
    {
        if (st->pid < 0 || st->ppid < 0 || st->pgrp < 0)
            std::abort();
    }
    std::vector<pid_t> pids;
    sandbox::detail::parse_pid_list(text, pids);
    for (pid_t p : pids)
        if (p <= 0)
            std::abort();
    return 0;
}
