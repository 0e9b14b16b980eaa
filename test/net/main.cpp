// test/net/main.cpp: the egress proxy's tests with real sockets on loopback, in-process (the
// resolver, the egress, the HTTP and SOCKS5 fronts, the relay). The sandboxed end-to-end
// tests (real clients inside bwrap) are in test/integration/net_bwrap_test.cpp.
#define BOOST_TEST_MODULE sandbox_net_tests
#include <boost/test/unit_test.hpp>
