// net/tunnel.cpp: the choice and the body of a tunnel (see tunnel.hpp).
#include "tunnel.hpp"

#include "sni_check.hpp"

namespace sandbox::net {

tunnel_choice choose_tunnel(egress& gate, net_protocol protocol, const std::string& requested,
                            const authority& target)
{
    tunnel_choice c;
    tls::inspector* inspection = gate.config().inspection.get();
    c.inspected = inspection && inspection->selects(target.host);
    if (!c.inspected)
        return c;
    tls::tunnel_slot slot = inspection->take_slot();
    if (!slot)
    {
        c.over_cap = true;
        gate.refuse(protocol, requested, open_status::tunnel_cap, "too many inspected tunnels open",
                    tls::inspected_cap_rule(*inspection));
        return c;
    }
    return tunnel_choice{true, std::move(slot), false};
}

boost::asio::awaitable<relay_totals> carry_tunnel(egress& gate,
                                                  boost::asio::ip::tcp::socket& client, opened& op,
                                                  const authority& target, std::string rest,
                                                  bool inspected)
{
    const auto idle = gate.limits().tunnel_idle_timeout;
    if (inspected)
        co_return co_await gate.config().inspection->tunnel(
            client, op.socket, std::move(op.early_bytes), target, std::move(rest), idle,
            op.record.connection,
            [&gate, &op](bool allowed, std::string reason, net_http_record h) {
                gate.request(op.record, allowed, std::move(reason), std::move(h));
            });
    const sni_mode mode = gate.config().sni;
    if (mode == sni_mode::off)
        co_return co_await relay(client, op.socket, std::move(rest), std::move(op.early_bytes),
                                 idle);
    sni_judgement judged;
    const canonical_host& host = target.host;
    const auto limit = gate.limits().client_hello_timeout;
    first_flight check = [&judged, &host, mode,
                          limit](boost::asio::ip::tcp::socket& from, std::string& held,
                                 const bool& stopping) -> boost::asio::awaitable<std::string> {
        judged = co_await check_sni(from, held, host, mode, limit, &stopping);
        co_return judged.refusal;
    };
    relay_totals t = co_await relay(client, op.socket, std::move(rest), std::move(op.early_bytes),
                                    idle, std::move(check));
    t.sni = std::move(judged.sni);
    t.sni_mismatch = judged.mismatch;
    co_return t;
}

} // namespace sandbox::net
