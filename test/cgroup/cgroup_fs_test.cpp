// test/cgroup/cgroup_fs_test.cpp
#include <boost/test/unit_test.hpp>
