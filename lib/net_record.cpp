// lib/net_record.cpp: the egress proxy's records as text and JSON (public, net_proxy.hpp).
#include <sandbox/net_proxy.hpp>
#include <sandbox/utf8.hpp>

#include <boost/json/array.hpp>

namespace sandbox {

const char* to_string(net_protocol p) noexcept
{
    switch (p)
    {
    case net_protocol::http: return "http";
    case net_protocol::connect: return "connect";
    case net_protocol::socks5: return "socks5";
    }
    return "unknown";
}

const char* to_string(net_verdict v) noexcept
{
    switch (v)
    {
    case net_verdict::allowed: return "allowed";
    case net_verdict::denied: return "denied";
    case net_verdict::failed: return "failed";
    }
    return "unknown";
}

const char* to_string(net_event e) noexcept
{
    switch (e)
    {
    case net_event::decision: return "decision";
    case net_event::closed: return "closed";
    case net_event::request: return "request";
    }
    return "unknown";
}

boost::json::object to_json(const net_record& r)
{
    boost::json::object o;
    o["event"] = to_string(r.event);
    o["connection"] = r.connection;
    o["protocol"] = to_string(r.protocol);
    o["requested_host"] = sanitize_utf8(r.requested_host);
    if (!r.host.empty())
        o["host"] = r.host;
    o["port"] = r.port;
    if (!r.rule.empty())
        o["rule"] = r.rule;
    o["verdict"] = to_string(r.verdict);
    o["reason"] = r.reason;
    if (!r.resolved.empty())
    {
        boost::json::array a;
        for (const auto& s : r.resolved)
            a.emplace_back(s);
        o["resolved"] = std::move(a);
    }
    if (!r.dialed.empty())
        o["dialed"] = r.dialed;
    if (r.event == net_event::closed)
    {
        o["bytes_up"] = r.bytes_up;
        o["bytes_down"] = r.bytes_down;
        // Integers: Boost.JSON writes doubles with exponents.
        o["duration_us"] =
            std::chrono::duration_cast<std::chrono::microseconds>(r.duration).count();
    }
    if (r.sni)
    {
        o["sni"] = sanitize_utf8(*r.sni);
        o["sni_mismatch"] = r.sni_mismatch;
    }
    if (r.tls)
    {
        boost::json::object t;
        t["sni"] = sanitize_utf8(r.tls->sni);
        t["client_handshake_us"] = r.tls->client_handshake.count();
        t["origin_handshake_us"] = r.tls->origin_handshake.count();
        t["leaf_from_cache"] = r.tls->leaf_from_cache;
        if (!r.tls->detail.empty())
            t["detail"] = sanitize_utf8(r.tls->detail);
        o["tls"] = std::move(t);
    }
    if (r.http)
    {
        boost::json::object h;
        h["number"] = r.http->number;
        h["method"] = sanitize_utf8(r.http->method);
        if (!r.http->rule.empty())
            h["rule"] = r.http->rule;
        h["status"] = r.http->status;
        if (!r.http->injected.empty())
        {
            boost::json::array names;
            for (const auto& n : r.http->injected)
                names.emplace_back(n);
            h["injected"] = std::move(names);
        }
        if (!r.http->request_hook.empty())
            h["request_hook"] = r.http->request_hook;
        if (!r.http->response_hook.empty())
            h["response_hook"] = r.http->response_hook;
        h["request_body_bytes"] = r.http->request_body_bytes;
        h["response_body_bytes"] = r.http->response_body_bytes;
        o["http"] = std::move(h);
    }
    return o;
}

} // namespace sandbox
