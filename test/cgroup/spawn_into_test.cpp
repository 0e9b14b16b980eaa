// test/cgroup/spawn_into_test.cpp
#include <boost/test/unit_test.hpp>
