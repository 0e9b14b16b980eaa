// test/unit/error_test.cpp: the error category, conditions and the exception type.
#include <sandbox/error.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/failure.hpp>

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <sstream>

using sandbox::condition;
using sandbox::errc;

BOOST_AUTO_TEST_SUITE(error_model)

BOOST_AUTO_TEST_CASE(one_errno_table)
{
    struct row
    {
        int err;
        errc code;
    };
    const row table[] = {
        {ENOENT, errc::not_found},        {ENOTDIR, errc::not_found},
        {EACCES, errc::forbidden},        {EPERM, errc::forbidden},
        {EROFS, errc::forbidden},         {ENOEXEC, errc::forbidden},
        {EINVAL, errc::validation},       {E2BIG, errc::validation},
        {ENAMETOOLONG, errc::validation}, {ELOOP, errc::validation},
        {EISDIR, errc::validation},       {ENXIO, errc::validation},
        {ETXTBSY, errc::conflict},        {EBUSY, errc::conflict},
        {EEXIST, errc::conflict},         {ENOSYS, errc::not_available},
        {ENOTSUP, errc::not_available},   {EOPNOTSUPP, errc::not_available},
        {EMFILE, errc::internal},         {ENFILE, errc::internal},
        {ENOMEM, errc::internal},         {EAGAIN, errc::internal},
        {EIO, errc::internal},            {0, errc::internal},
    };
    for (const row& r : table)
        BOOST_TEST(sandbox::errc_from_errno(r.err) == r.code, "errno " << r.err);
}

BOOST_AUTO_TEST_CASE(every_code_has_a_name_and_message)
{
    for (int i = 1; i <= 10; ++i)
    {
        auto e = static_cast<errc>(i);
        boost::system::error_code ec = e;
        BOOST_TEST(ec.category().name() == std::string("sandbox"));
        BOOST_TEST(std::string(sandbox::to_string(e)) != "unknown");
        BOOST_TEST(!ec.message().empty());
        BOOST_TEST(sandbox::error_name(ec) == sandbox::to_string(e));
    }
    BOOST_TEST(std::string(sandbox::to_string(static_cast<errc>(99))) == "unknown");
}

BOOST_AUTO_TEST_CASE(conditions_group_codes)
{
    boost::system::error_code forbidden = errc::forbidden, denied = errc::policy_denied;
    BOOST_TEST(forbidden == condition::denied);
    BOOST_TEST(denied == condition::denied);
    BOOST_TEST(boost::system::error_code(errc::timeout) == condition::limit_reached);
    BOOST_TEST(boost::system::error_code(errc::budget_exceeded) == condition::limit_reached);
    BOOST_TEST(boost::system::error_code(errc::validation) == condition::bad_request);
    BOOST_TEST(boost::system::error_code(errc::not_found) == condition::bad_request);
    BOOST_TEST(boost::system::error_code(errc::not_available) == condition::unavailable);
    // Disjointness the reference pins: policy denial is not forbidden, budget is not timeout.
    BOOST_TEST(denied != boost::system::error_code(errc::forbidden));
    BOOST_TEST(boost::system::error_code(errc::internal) != condition::denied);
    BOOST_TEST(boost::system::error_code(errc::conflict) != condition::bad_request);
    // OS errors pass through untranslated.
    boost::system::error_code os(ENOENT, boost::system::system_category());
    BOOST_TEST(os != errc::not_found);
    BOOST_TEST(sandbox::error_name(os) == "system:2");
    BOOST_TEST(sandbox::error_name(boost::asio::error::operation_aborted) == "aborted");
    BOOST_TEST(sandbox::error_name({}) == "");
}

BOOST_AUTO_TEST_CASE(streaming)
{
    std::ostringstream os;
    os << errc::timeout << " " << condition::denied;
    BOOST_TEST(os.str() == "sandbox:timeout sandbox.condition:denied");
}

BOOST_AUTO_TEST_CASE(exception_carries_diagnostics_and_partial_result)
{
    sandbox::diagnostics d;
    d.message = "memory cap exceeded";
    d.limit = "memory";
    sandbox::exec_result partial;
    partial.out.data = "so far";
    partial.status = sandbox::exec_status::budget_exceeded;
    try
    {
        throw sandbox::error(errc::budget_exceeded, d, partial);
    }
    catch (const boost::system::system_error& e)
    {
        BOOST_TEST(e.code() == errc::budget_exceeded);
        BOOST_TEST(std::string(e.what()).find("memory cap exceeded") != std::string::npos);
        auto* se = dynamic_cast<const sandbox::error*>(&e);
        BOOST_REQUIRE(se);
        BOOST_TEST(se->diag().limit == "memory");
        BOOST_REQUIRE(se->partial_result());
        BOOST_TEST(se->partial_result()->out.data == "so far");
    }
    sandbox::error no_result(errc::validation, d);
    BOOST_TEST(!no_result.partial_result());
    // Copies share the payload.
    sandbox::error copy = no_result;
    BOOST_TEST(&copy.diag() == &no_result.diag());
}

BOOST_AUTO_TEST_CASE(failure_throws_through_result)
{
    sandbox::outcome<int> r = sandbox::make_failure(errc::validation, "bad", "field");
    BOOST_TEST(r.has_error());
    BOOST_TEST(r.error().diag.limit == "field");
    BOOST_CHECK_THROW(r.value(), sandbox::error);
    sandbox::outcome<int> ok = 3;
    BOOST_TEST(ok.value() == 3);
}

BOOST_AUTO_TEST_CASE(diagnostics_text)
{
    sandbox::diagnostics d;
    BOOST_TEST(d.empty());
    d.message = "m";
    d.path = "/x";
    d.observed = 5;
    d.configured = 4;
    d.cause = boost::system::error_code(ENOEXEC, boost::system::system_category());
    auto s = sandbox::to_string(d);
    BOOST_TEST(s.find("m [path=/x]") == 0u);
    BOOST_TEST(s.find("5/4") != std::string::npos);
    BOOST_TEST(s.find("cause=") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(status_names_round_trip)
{
    for (int i = 0; i <= 6; ++i)
    {
        auto s = static_cast<sandbox::exec_status>(i);
        BOOST_TEST(sandbox::parse_exec_status(sandbox::to_string(s)).value() == s);
    }
    BOOST_TEST(!sandbox::parse_exec_status("bogus"));
    BOOST_TEST(std::string(sandbox::to_string(sandbox::budget_kind::processes)) == "processes");
    BOOST_TEST(std::string(sandbox::to_string(sandbox::budget_kind::tasks)) == "tasks");
}

BOOST_AUTO_TEST_SUITE_END()
