// protocol/init_status.cpp: parsing the status pipe's lines (pure; unit-tested).
#include "protocol/init_status.hpp"

#include <cstdio>
#include <string>

namespace sandbox::detail {

init_report parse_init_report(std::string_view text)
{
    init_report r;
    while (!text.empty())
    {
        const std::size_t nl = text.find('\n');
        if (nl == std::string_view::npos)
            break; // a line cut short: the init died while writing it
        const std::string line(text.substr(0, nl));
        text.remove_prefix(nl + 1);
        long v = 0;
        char extra = 0;
        if (line == "started")
            r.started = true;
        else if (line.rfind("unreachable ", 0) == 0 && r.unreachable_path.size() < 16)
            r.unreachable_path.push_back(line.substr(12));
        else if (std::sscanf(line.c_str(), "exec %ld%c", &v, &extra) == 1 && v > 0 && v < 4096)
            r.exec_errno = static_cast<int>(v);
        else if (std::sscanf(line.c_str(), "status %ld%c", &v, &extra) == 1 && v >= 0 &&
                 v <= 0xffff)
            r.wait_status = static_cast<int>(v);
    }
    return r;
}

} // namespace sandbox::detail
