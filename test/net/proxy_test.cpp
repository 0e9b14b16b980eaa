// test/net/proxy_test.cpp
#include <boost/test/unit_test.hpp>
