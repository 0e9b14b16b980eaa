// test/net/egress_test.cpp
#include <boost/test/unit_test.hpp>
