// test/net/resolver_test.cpp
#include <boost/test/unit_test.hpp>
