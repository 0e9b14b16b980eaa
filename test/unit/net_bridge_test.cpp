// test/unit/net_bridge_test.cpp: the listener hand-off's message and the proxy environment
// the status init gives the command (protocol/net_bridge.hpp).
#include "protocol/net_bridge.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace {

using sandbox::detail::net_bridge_body;
using sandbox::detail::parse_net_bridge_body;
using sandbox::detail::proxy_environment;

} // namespace

BOOST_AUTO_TEST_SUITE(net_bridge)

BOOST_AUTO_TEST_CASE(the_body_names_the_port_and_nothing_else)
{
    BOOST_TEST(net_bridge_body(3128) == "listen 3128\n");
    for (unsigned port : {1u, 3128u, 65535u})
        BOOST_TEST(parse_net_bridge_body(net_bridge_body(static_cast<std::uint16_t>(port)))
                       .value_or(0) == port);
    for (const char* bad : {"", "listen \n", "listen 0\n", "listen 65536\n", "listen 3128",
                            "listen 3128 \n", "listen +3128\n", "listen 003128\n",
                            "listen -1\n", "LISTEN 3128\n", "listen 3128\nx", "listen 31a8\n"})
        BOOST_TEST(!parse_net_bridge_body(bad), bad);
}

BOOST_AUTO_TEST_CASE(the_proxy_variables_replace_the_callers_in_both_cases)
{
    const std::vector<std::string> env{"PATH=/usr/bin", "HTTP_PROXY=http://caller:1",
                                       "http_proxy=x", "Https_Proxy=y", "no_proxy=*",
                                       "all_proxy=socks5h://z", "grpc_proxy=g",
                                       "HTTP_PROXY_EXTRA=kept", "MY_HTTP_PROXY=kept", "EMPTY="};
    auto got = proxy_environment(env, 4000);
    const std::string url = "http://127.0.0.1:4000";
    const std::vector<std::string> want{
        "PATH=/usr/bin", "HTTP_PROXY_EXTRA=kept", "MY_HTTP_PROXY=kept", "EMPTY=",
        "http_proxy=" + url, "HTTP_PROXY=" + url, "https_proxy=" + url, "HTTPS_PROXY=" + url,
        "all_proxy=" + url, "ALL_PROXY=" + url, "grpc_proxy=" + url, "GRPC_PROXY=" + url,
        "no_proxy=localhost,127.0.0.1,::1", "NO_PROXY=localhost,127.0.0.1,::1"};
    BOOST_TEST(got == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
