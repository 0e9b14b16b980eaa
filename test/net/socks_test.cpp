// test/net/socks_test.cpp
#include <boost/test/unit_test.hpp>
