// Config documents: parsing and validation (no I/O). Filled in by the config test pass.
#include <sandbox/config/document.hpp>

#include <boost/test/unit_test.hpp>

BOOST_AUTO_TEST_SUITE(config_document)

BOOST_AUTO_TEST_CASE(an_empty_map_of_sandboxes_is_a_good_document)
{
    auto d = sandbox::config::parse_document("version: v1\nsandboxes: {}\n");
    BOOST_TEST_REQUIRE(d.has_value());
    BOOST_TEST(d->sandboxes.empty());
}

BOOST_AUTO_TEST_SUITE_END()
