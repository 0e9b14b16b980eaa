// test/integration/net_bwrap_test.cpp
#include <boost/test/unit_test.hpp>
