// test/unit/net_guard_test.cpp
#include <boost/test/unit_test.hpp>
