// net/tls/origin_context.cpp: the client-side SSL_CTX towards origins.
#include "origin_context.hpp"

#include "trust.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace sandbox::net::tls {

namespace {

// Adds every certificate of `pem` to `store`; false when there is none or one is broken.
bool add_roots(X509_STORE* store, const std::string& pem)
{
    BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    if (!b)
        return false;
    int added = 0;
    while (X509* c = PEM_read_bio_X509(b, nullptr, nullptr, nullptr))
    {
        const bool ok = X509_STORE_add_cert(store, c) == 1;
        X509_free(c);
        if (!ok)
            break;
        ++added;
    }
    // The loop ends at the end of the input (PEM_R_NO_START_LINE) or at a broken one.
    const unsigned long last = ERR_peek_last_error();
    const bool clean_end = ERR_GET_REASON(last) == PEM_R_NO_START_LINE;
    ERR_clear_error();
    BIO_free(b);
    return added > 0 && clean_end;
}

// The system's roots parsed: shared by every origin context of the process, parsed again
// only when the bundle's text changes (`system_roots`). OpenSSL's own default paths would
// parse the whole bundle for every context: about 20 ms, every call.
struct parsed_roots
{
    std::shared_ptr<const std::string> text;
    std::vector<X509*> certs;
    parsed_roots() = default;
    parsed_roots(const parsed_roots&) = delete;
    parsed_roots& operator=(const parsed_roots&) = delete;
    ~parsed_roots()
    {
        for (X509* c : certs)
            X509_free(c);
    }
};

std::shared_ptr<const parsed_roots> system_root_certs()
{
    static std::mutex lock;
    static std::shared_ptr<const parsed_roots> last;
    auto text = system_roots();
    std::lock_guard hold(lock);
    if (last && last->text == text)
        return last;
    auto parsed = std::make_shared<parsed_roots>();
    parsed->text = text;
    if (BIO* b = BIO_new_mem_buf(text->data(), static_cast<int>(text->size())))
    {
        while (X509* c = PEM_read_bio_X509(b, nullptr, nullptr, nullptr))
            parsed->certs.push_back(c);
        BIO_free(b);
    }
    ERR_clear_error();
    last = parsed;
    return last;
}

constexpr unsigned char http11_wire[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

bool add_system_roots(X509_STORE* store, bool wanted)
{
    if (!wanted)
        return true;
    const auto roots = system_root_certs();
    for (X509* c : roots->certs)
        if (X509_STORE_add_cert(store, c) != 1) // (it takes a reference of its own)
            return false;
    return true;
}

} // namespace

// What OpenSSL's callbacks reach of an origin_sessions: the SSL's ex_data names it.
struct origin_sessions::access
{
    static constexpr std::size_t capacity = 256;

    static int index()
    {
        static const int i = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
        return i;
    }
    // OpenSSL's new-session callback: keeps `s` under the name we sent (servers need not
    // acknowledge it in the session); 1: the reference is ours.
    static int keep(SSL* ssl, SSL_SESSION* s)
    {
        auto* self = static_cast<origin_sessions*>(SSL_get_ex_data(ssl, index()));
        const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
        if (!self || !name || !SSL_SESSION_is_resumable(s))
            return 0;
        auto& m = self->by_name_;
        if (m.size() >= capacity && !m.count(name))
            clear(m);
        SSL_SESSION*& slot = m[name];
        if (slot)
            SSL_SESSION_free(slot);
        slot = s;
        return 1;
    }
    static void clear(std::map<std::string, SSL_SESSION*, std::less<>>& m)
    {
        for (auto& [n, old] : m)
            SSL_SESSION_free(old);
        m.clear();
    }
    static void offer(origin_sessions& self, SSL* ssl, const std::string& name)
    {
        SSL_set_ex_data(ssl, index(), &self);
        if (auto it = self.by_name_.find(name); it != self.by_name_.end())
            SSL_set_session(ssl, it->second);
    }
};

origin_sessions::~origin_sessions()
{
    access::clear(by_name_);
}

origin_context::origin_context(SSL_CTX* ctx) noexcept : ctx_(ctx)
{
    if (ctx_)
    {
        SSL_CTX_set_session_cache_mode(ctx_,
                                       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx_, &origin_sessions::access::keep);
    }
}

origin_context::~origin_context()
{
    SSL_CTX_free(ctx_);
}

outcome<std::unique_ptr<origin_context>> origin_context::create(const origin_trust& trust)
{
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    std::unique_ptr<origin_context> out(ctx ? new origin_context(ctx) : nullptr);
    if (!ctx || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        !add_system_roots(SSL_CTX_get_cert_store(ctx), trust.system_roots))
    {
        ERR_clear_error();
        return make_failure(errc::internal, "TLS inspection: cannot make the origin context");
    }
    for (std::size_t i = 0; i < trust.extra_roots_pem.size(); ++i)
        if (!add_roots(SSL_CTX_get_cert_store(ctx), trust.extra_roots_pem[i]))
            return make_failure(errc::validation,
                                "TLS inspection: net.mitm.origin_ca[" + std::to_string(i) +
                                    "] is not a PEM certificate list",
                                "net.mitm.origin_ca");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION); // the legs run one read, one write
    return out;
}

outcome<std::shared_ptr<origin_context>> shared_origin_context(const origin_trust& trust)
{
    struct entry
    {
        origin_trust trust;
        std::shared_ptr<const std::string> system;
        std::shared_ptr<origin_context> context;
    };
    constexpr std::size_t kept = 8; // distinct trusts kept, the most recently used first
    static std::mutex lock;
    static std::vector<entry> made;
    auto system = system_roots();
    std::lock_guard hold(lock);
    std::erase_if(made, [&](const entry& e) { return e.system != system; });
    for (auto it = made.begin(); it != made.end(); ++it)
        if (it->trust.system_roots == trust.system_roots &&
            it->trust.extra_roots_pem == trust.extra_roots_pem)
        {
            std::rotate(made.begin(), it, it + 1);
            return made.front().context;
        }
    auto created = origin_context::create(trust);
    if (!created)
        return created.error();
    made.insert(made.begin(), {trust, std::move(system), std::move(*created)});
    if (made.size() > kept)
        made.pop_back();
    return made.front().context;
}

outcome<SSL*> origin_context::new_connection(const canonical_host& host, origin_sessions* sessions)
{
    SSL* ssl = SSL_new(ctx_);
    bool ok = ssl != nullptr && SSL_set_alpn_protos(ssl, http11_wire, sizeof http11_wire) == 0;
    const std::string text = host.text();
    if (ok && host.is_ip())
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), text.c_str()) == 1;
    else if (ok)
        ok = SSL_set_tlsext_host_name(ssl, text.c_str()) == 1 &&
             SSL_set1_host(ssl, text.c_str()) == 1;
    if (ok && sessions && !host.is_ip())
        origin_sessions::access::offer(*sessions, ssl, text);
    if (!ok)
    {
        SSL_free(ssl);
        ERR_clear_error();
        return make_failure(errc::internal,
                            "TLS inspection: cannot prepare the origin's TLS for " + text);
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

SSL_CTX* origin_context::native_handle() const noexcept
{
    return ctx_;
}

std::string verify_failure(SSL* ssl)
{
    const long r = SSL_get_verify_result(ssl);
    return r == X509_V_OK ? std::string{} : X509_verify_cert_error_string(r);
}

} // namespace sandbox::net::tls
