// lib/diagnostics.cpp: text rendering of diagnostics.
#include <sandbox/diagnostics.hpp>

#include <ostream>

namespace sandbox {

std::string to_string(const diagnostics& d)
{
    std::string s = d.message;
    auto add = [&s](const char* key, const std::string& v) {
        if (v.empty())
            return;
        s += s.empty() ? "" : " ";
        s += '[';
        s += key;
        s += '=';
        s += v;
        s += ']';
    };
    add("limit", d.limit);
    add("rule", d.rule);
    add("path", d.path);
    add("backend", d.backend);
    if (d.observed != 0 || d.configured != 0)
        add("observed/limit", std::to_string(d.observed) + "/" + std::to_string(d.configured));
    if (d.cause)
        add("cause", d.cause.message());
    return s;
}

std::ostream& operator<<(std::ostream& os, const diagnostics& d) { return os << to_string(d); }

} // namespace sandbox
