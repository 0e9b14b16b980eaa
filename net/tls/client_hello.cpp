// net/tls/client_hello.cpp: a bounded reader of the ClientHello (RFC 8446 4.1.2, RFC 6066 3,
// RFC 7301 3.1).
#include "client_hello.hpp"

#include <algorithm>
#include <optional>
#include <set>

namespace sandbox::net::tls {

namespace {

using verdict = hello_peek::verdict;

// A cursor over the handshake message; every read checks its bound.
struct reader
{
    const unsigned char* p;
    std::size_t left;

    bool take(std::size_t n, const unsigned char*& out)
    {
        if (n > left)
            return false;
        out = p;
        p += n;
        left -= n;
        return true;
    }
    bool skip(std::size_t n)
    {
        const unsigned char* ignored = nullptr;
        return take(n, ignored);
    }
    bool number(std::size_t width, std::size_t& out)
    {
        const unsigned char* b = nullptr;
        if (!take(width, b))
            return false;
        out = 0;
        for (std::size_t i = 0; i < width; ++i)
            out = (out << 8) | b[i];
        return true;
    }
    // A length of `width` bytes, then that many bytes.
    bool vector(std::size_t width, reader& inner)
    {
        std::size_t n = 0;
        const unsigned char* b = nullptr;
        if (!number(width, n) || !take(n, b))
            return false;
        inner = reader{b, n};
        return true;
    }
};

// The handshake bytes carried by consecutive handshake records, up to `cap` + 4.
struct gathered
{
    verdict what = verdict::need_more;
    std::vector<unsigned char> message;
    std::size_t bytes = 0;
};

gathered gather(std::span<const unsigned char> in, std::size_t cap)
{
    gathered g;
    std::size_t at = 0;
    while (true)
    {
        // Judged on the header bytes there are: a client that sent one byte of another
        // protocol and waits for an answer is never kept waiting for four more. What a TLS
        // stack would take as a record (content type 20-23, a version's first byte under
        // 0x10: an alert before the hello, a version OpenSSL or Go accepts that we do not
        // name) is TLS that is no ClientHello here: malformed, never "not TLS".
        const std::size_t have = in.size() - at;
        const unsigned char* h = in.data() + at;
        const bool record_like =
            (have < 1 || (h[0] >= 20 && h[0] <= 23)) && (have < 2 || h[1] < 0x10);
        if (!record_like)
        {
            g.what = at == 0 ? verdict::not_tls : verdict::malformed;
            return g;
        }
        if (have > 0 && h[0] != 22) // an alert, a cipher change or data before the hello
        {
            g.what = verdict::malformed;
            return g;
        }
        if (have > 1 && h[1] != 3)
        {
            g.what = verdict::malformed;
            return g;
        }
        if (have < 5)
            return g; // need_more
        const std::size_t len = static_cast<std::size_t>((h[3] << 8) | h[4]);
        if (len == 0 || len > 16384 + 256)
        {
            g.what = verdict::malformed;
            return g;
        }
        if (in.size() - at - 5 < len)
            return g; // need_more
        g.message.insert(g.message.end(), h + 5, h + 5 + len);
        at += 5 + len;
        g.bytes = at;
        if (g.message.size() >= 4)
        {
            const std::size_t body =
                (std::size_t{g.message[1]} << 16) | (std::size_t{g.message[2]} << 8) | g.message[3];
            if (g.message[0] != 1) // not a ClientHello
            {
                g.what = verdict::malformed;
                return g;
            }
            if (body > cap)
            {
                g.what = verdict::too_large;
                return g;
            }
            if (g.message.size() >= 4 + body)
            {
                g.message.resize(4 + body); // what follows belongs to the next message
                g.what = verdict::tls;
                return g;
            }
        }
    }
}

bool read_alpn(reader r, std::vector<std::string>& out)
{
    reader list{};
    if (!r.vector(2, list) || r.left != 0 || list.left == 0)
        return false;
    while (list.left > 0)
    {
        reader name{};
        if (!list.vector(1, name) || name.left == 0)
            return false;
        out.emplace_back(reinterpret_cast<const char*>(name.p), name.left);
    }
    return true;
}

bool read_extensions(reader exts, hello_peek& out)
{
    std::set<std::size_t> seen;
    while (exts.left > 0)
    {
        std::size_t type = 0;
        reader body{};
        if (!exts.number(2, type) || !exts.vector(2, body) || !seen.insert(type).second)
            return false;
        if (type == 0) // server_name
        {
            auto name = parse_server_name(body.p, body.left);
            if (!name)
                return false;
            out.sni = std::move(*name);
        }
        else if (type == 16 && !read_alpn(body, out.alpn)) // application_layer_protocol_negotiation
            return false;
    }
    return true;
}

// The ClientHello body: version, random, session id, suites, compression, extensions.
bool read_hello(reader r, hello_peek& out)
{
    reader session{}, suites{}, compression{}, exts{};
    if (!r.skip(2 + 32) || !r.vector(1, session) || session.left > 32 || !r.vector(2, suites) ||
        suites.left < 2 || suites.left % 2 != 0 || !r.vector(1, compression) ||
        compression.left < 1)
        return false;
    if (r.left == 0)
        return true; // no extensions at all (TLS 1.2 allows it)
    return r.vector(2, exts) && r.left == 0 && read_extensions(exts, out);
}

} // namespace

hello_peek peek_client_hello(std::span<const unsigned char> bytes, std::size_t cap)
{
    hello_peek out;
    gathered g = gather(bytes, cap);
    out.what = g.what;
    out.bytes = g.bytes;
    if (g.what != verdict::tls)
        return out;
    if (!read_hello(reader{g.message.data() + 4, g.message.size() - 4}, out))
    {
        out = hello_peek{};
        out.what = verdict::malformed;
        out.bytes = g.bytes;
    }
    return out;
}

std::optional<std::string> parse_server_name(const unsigned char* body, std::size_t size)
{
    if (size < 5 || static_cast<std::size_t>((body[0] << 8) | body[1]) != size - 2)
        return std::nullopt;
    // One host_name and nothing else (RFC 6066 3: one name per type, and host_name is the only
    // type): a second entry could name another host than the one a server takes, so a list
    // of two is refused rather than read by its first.
    const std::size_t len = static_cast<std::size_t>((body[3] << 8) | body[4]);
    if (body[2] != 0 || len == 0 || 5 + len != size)
        return std::nullopt;
    // A host name is ASCII (RFC 6066 3): a NUL, a space, a control byte or a U-label's UTF-8 is
    // no name at all, refused rather than mapped.
    const auto* name = body + 5;
    if (std::any_of(name, name + len, [](unsigned char c) { return c <= 0x20 || c >= 0x7f; }))
        return std::nullopt;
    return std::string(reinterpret_cast<const char*>(name), len);
}

} // namespace sandbox::net::tls
