// net/tls/server_context.cpp: the server-side SSL_CTX and its ClientHello callback.
#include "server_context.hpp"

#include "client_hello.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/tls1.h>

#include <array>
#include <optional>

namespace sandbox::net::tls {

namespace {

// The SSL's slot for its client_hello_state, made once per process.
int state_index()
{
    static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
    return index;
}

constexpr std::array<unsigned char, 9> http11{8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

int select_http11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                  unsigned int inlen, void*)
{
    unsigned char* chosen = nullptr;
    if (SSL_select_next_proto(&chosen, outlen, http11.data(), http11.size(), in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL; // no_application_protocol: h2 comes later
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

int refuse(client_hello_state& st, const char* why, int alert_code, int* alert)
{
    st.refused = why;
    *alert = alert_code;
    return SSL_CLIENT_HELLO_ERROR;
}

} // namespace

struct server_context::impl
{
    certificate_authority& ca;
    SSL_CTX* ctx = nullptr;

    explicit impl(certificate_authority& c) : ca(c) {}
    ~impl() { SSL_CTX_free(ctx); }

    // The SNI check (lesson: the CONNECT host is the only identity) and the leaf.
    static int on_client_hello(SSL* ssl, int* alert, void* arg)
    {
        auto& self = *static_cast<impl*>(arg);
        auto* st = static_cast<client_hello_state*>(SSL_get_ex_data(ssl, state_index()));
        if (!st)
        {
            *alert = SSL_AD_INTERNAL_ERROR;
            return SSL_CLIENT_HELLO_ERROR;
        }
        const unsigned char* ext = nullptr;
        std::size_t len = 0;
        if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &ext, &len) == 1)
        {
            auto sni = parse_server_name(ext, len);
            if (!sni)
                return refuse(*st, "bad_sni", SSL_AD_DECODE_ERROR, alert);
            st->sni = *sni;
            auto named = canonicalize_host(*sni);
            if (!named || named->text() != st->connect_host.text())
                return refuse(*st, "sni_mismatch", SSL_AD_UNRECOGNIZED_NAME, alert);
        }
        auto leaf = self.ca.leaf_for(st->connect_host, clock::now(), &st->leaf_from_cache);
        if (!leaf || SSL_use_cert_and_key(ssl, (*leaf)->cert, self.ca.leaf_key(), nullptr, 1) != 1)
        {
            ERR_clear_error();
            return refuse(*st, "no_leaf", SSL_AD_INTERNAL_ERROR, alert);
        }
        st->leaf = std::move(*leaf);
        return SSL_CLIENT_HELLO_SUCCESS;
    }
};

server_context::server_context(std::unique_ptr<impl> p) noexcept : p_(std::move(p)) {}
server_context::~server_context() = default;

outcome<std::unique_ptr<server_context>> server_context::create(certificate_authority& ca)
{
    auto p = std::make_unique<impl>(ca);
    p->ctx = SSL_CTX_new(TLS_server_method());
    if (!p->ctx || SSL_CTX_set_min_proto_version(p->ctx, TLS1_2_VERSION) != 1)
    {
        ERR_clear_error();
        return make_failure(errc::internal, "TLS inspection: cannot make the server context");
    }
    SSL_CTX_set_mode(p->ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(p->ctx, SSL_OP_NO_RENEGOTIATION); // the legs run one read, one write
    SSL_CTX_set_client_hello_cb(p->ctx, &impl::on_client_hello, p.get());
    SSL_CTX_set_alpn_select_cb(p->ctx, &select_http11, nullptr);
    return std::unique_ptr<server_context>(new server_context(std::move(p)));
}

outcome<SSL*> server_context::new_connection(client_hello_state& state)
{
    SSL* ssl = SSL_new(p_->ctx);
    if (!ssl || SSL_set_ex_data(ssl, state_index(), &state) != 1)
    {
        SSL_free(ssl);
        ERR_clear_error();
        return make_failure(errc::internal, "TLS inspection: cannot make a connection's TLS state");
    }
    SSL_set_accept_state(ssl);
    return ssl;
}

SSL_CTX* server_context::native_handle() const noexcept
{
    return p_->ctx;
}

} // namespace sandbox::net::tls
