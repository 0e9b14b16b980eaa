// test/unit/idle_claim_test.cpp: the word an idle worker and the library share
// (protocol/idle_claim.hpp): one side wins, the other learns it, and both see one word.
#include <boost/test/unit_test.hpp>

#include "protocol/idle_claim.hpp"

#include <atomic>
#include <thread>
#include <vector>

#include <unistd.h>

using sandbox::detail::proto::idle_claim;

BOOST_AUTO_TEST_SUITE(idle_claims)

BOOST_AUTO_TEST_CASE(the_library_taking_first_keeps_the_worker)
{
    auto lib = idle_claim::make();
    BOOST_TEST_REQUIRE(static_cast<bool>(lib));
    auto worker = idle_claim::map(lib.fd()); // the other mapping of the same page
    BOOST_TEST_REQUIRE(static_cast<bool>(worker));
    BOOST_TEST(lib.take());
    BOOST_TEST(!worker.retire());
    BOOST_TEST(!worker.has_retired());
    BOOST_TEST(!lib.take(), "taken once");
}

BOOST_AUTO_TEST_CASE(the_worker_retiring_first_is_seen_by_the_library)
{
    auto lib = idle_claim::make();
    auto worker = idle_claim::map(lib.fd());
    lib.drop_fd(); // sent: the mapping stays
    BOOST_TEST(worker.retire());
    BOOST_TEST(lib.has_retired());
    BOOST_TEST(!lib.take());
}

BOOST_AUTO_TEST_CASE(exactly_one_side_wins_a_race)
{
    for (int round = 0; round < 2000; ++round)
    {
        auto lib = idle_claim::make();
        auto worker = idle_claim::map(lib.fd());
        std::atomic<bool> go{false};
        bool took = false, retired = false;
        std::thread t([&] {
            while (!go.load())
            {
            }
            retired = worker.retire();
        });
        go = true;
        took = lib.take();
        t.join();
        BOOST_TEST_REQUIRE(took != retired, "round " << round);
    }
}

BOOST_AUTO_TEST_CASE(an_empty_or_short_descriptor_maps_to_nothing)
{
    idle_claim none;
    BOOST_TEST(!none.take());
    BOOST_TEST(!none.retire());
    BOOST_TEST(!static_cast<bool>(idle_claim::map(-1)));
    int p[2];
    BOOST_TEST_REQUIRE(::pipe(p) == 0);
    BOOST_TEST(!static_cast<bool>(idle_claim::map(p[0]))); // not a page of memory
    ::close(p[0]);
    ::close(p[1]);
    // Moved: the mapping goes with it.
    auto a = idle_claim::make();
    auto b = std::move(a);
    BOOST_TEST(!static_cast<bool>(a));
    BOOST_TEST(b.take());
}

BOOST_AUTO_TEST_SUITE_END()
