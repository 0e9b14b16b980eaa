// test/cgroup: the cgroup path's parts against real processes and cgroupfs (the cgroup2
// mount, in a tree each test makes and removes), and against a directory tree standing in
// for it. Tests that need what this host does not offer (a delegated controller, a writable
// cgroup2 mount) are skipped with the reason.
#define BOOST_TEST_MODULE sandbox_cgroup_tests
#include <boost/test/unit_test.hpp>
