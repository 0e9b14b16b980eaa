// test/unit/main.cpp: the unit test module (logic without I/O).
#define BOOST_TEST_MODULE sandbox_unit_tests
#include <boost/test/unit_test.hpp>
