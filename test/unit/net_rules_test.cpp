// test/unit/net_rules_test.cpp
#include <boost/test/unit_test.hpp>
