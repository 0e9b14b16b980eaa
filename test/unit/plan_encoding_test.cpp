// test/unit/plan_encoding_test.cpp: the plan as it goes to the worker (protocol/protocol.hpp):
// what is encoded comes back whole, and a truncated or lying message is refused, not read
// past its end.
#include <boost/test/unit_test.hpp>

#include "protocol/protocol.hpp"

#include <cstdint>
#include <string>

namespace proto = sandbox::detail::proto;

namespace {

proto::plan sample()
{
    proto::plan p;
    p.fixed.options = proto::opt_tty | proto::opt_connect_broker | proto::opt_inside;
    p.executable = "/bin/sh";
    p.argv = {"sh", "-c", "true"};
    p.envp = {"PATH=/usr/bin"};
    p.tty_path = "/dev/pts/7";
    p.allowed_sockets = {{1, 2, "/run/a.sock"}, {0xffffffffffffffffull, 42, ""}};
    p.work_dir_path = "/work/inside dir";
    return p;
}

} // namespace

BOOST_AUTO_TEST_SUITE(plan_encoding)

BOOST_AUTO_TEST_CASE(a_plan_with_allowed_sockets_comes_back_whole)
{
    const auto p = sample();
    const auto back = proto::decode_plan(proto::encode_plan(p));
    BOOST_TEST_REQUIRE(back.has_value());
    BOOST_TEST(back->executable == p.executable);
    BOOST_TEST((back->argv == p.argv));
    BOOST_TEST((back->envp == p.envp));
    BOOST_TEST(back->tty_path == p.tty_path);
    BOOST_TEST((back->allowed_sockets == p.allowed_sockets));
    BOOST_TEST(back->work_dir_path == p.work_dir_path);
}

BOOST_AUTO_TEST_CASE(every_truncation_is_refused)
{
    const std::string bytes = proto::encode_plan(sample());
    for (std::size_t n = 0; n < bytes.size(); ++n)
        BOOST_TEST(!proto::decode_plan(std::string_view(bytes).substr(0, n)).has_value(), n);
    BOOST_TEST(!proto::decode_plan(bytes + "x").has_value());
}

// A count of sockets the rest of the message cannot hold is refused before anything is
// allocated for it.
BOOST_AUTO_TEST_CASE(a_socket_count_beyond_the_message_is_refused)
{
    proto::plan p = sample();
    p.fixed.options = proto::opt_connect_broker;
    p.allowed_sockets.clear();
    p.work_dir_path.clear();
    std::string bytes = proto::encode_plan(p); // ends with the count, 0
    BOOST_TEST_REQUIRE(proto::decode_plan(bytes).has_value());
    const std::uint32_t huge = 0xffffffffu;
    bytes.replace(bytes.size() - sizeof huge, sizeof huge, reinterpret_cast<const char*>(&huge),
                  sizeof huge);
    BOOST_TEST(!proto::decode_plan(bytes).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
