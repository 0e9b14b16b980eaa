// test/unit/net_host_test.cpp
#include <boost/test/unit_test.hpp>
