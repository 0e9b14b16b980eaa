// test/unit/proc_parse_test.cpp: /proc text parsers.
#include "helper/proc.hpp"

#include <boost/test/unit_test.hpp>

using sandbox::detail::parse_pid_list;
using sandbox::detail::parse_proc_stat;

BOOST_AUTO_TEST_SUITE(proc_parse)

// A real line shape (fields 1..52), with a command name holding spaces and parentheses.
const char* line = "4242 (my (odd) name) S 4200 4242 4100 34816 4242 4194304 120 0 0 0 "
                   "17 5 30 12 20 0 3 0 987654 123456789 2560 18446744073709551615 1 1 0 0 "
                   "0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

BOOST_AUTO_TEST_CASE(parses_fields_after_the_command_name)
{
    auto st = parse_proc_stat(line);
    BOOST_TEST_REQUIRE(st.has_value());
    BOOST_TEST(st->pid == 4242);
    BOOST_TEST(st->state == 'S');
    BOOST_TEST(st->ppid == 4200);
    BOOST_TEST(st->pgrp == 4242);
    BOOST_TEST(st->session == 4100);
    BOOST_TEST(st->utime == 17u);
    BOOST_TEST(st->stime == 5u);
    BOOST_TEST(st->cutime == 30u);
    BOOST_TEST(st->cstime == 12u);
    BOOST_TEST(st->num_threads == 3);
    BOOST_TEST(st->starttime == 987654u);
    BOOST_TEST(st->rss_pages == 2560u);
    BOOST_TEST(st->cpu_ticks() == 64u);
}

BOOST_AUTO_TEST_CASE(sigignore_tells_whose_children_the_kernel_reaps)
{
    BOOST_TEST(parse_proc_stat(line)->sigignore == 0u);
    BOOST_TEST(!parse_proc_stat(line)->children_reaped_by_kernel());
    // Field 33 (sigignore) = 65536 | 4096: SIGCHLD (17) and SIGPIPE (13) ignored.
    const char* ignoring = "4242 (sh) S 4200 4242 4100 34816 4242 4194304 120 0 0 0 "
                           "17 5 30 12 20 0 3 0 987654 123456789 2560 18446744073709551615 1 1 0 0 "
                           "0 0 0 69632 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    auto st = parse_proc_stat(ignoring);
    BOOST_TEST_REQUIRE(st.has_value());
    BOOST_TEST(st->sigignore == 69632u);
    BOOST_TEST(st->children_reaped_by_kernel());
    // SIGPIPE alone is not SIGCHLD.
    const char* pipe_only = "4242 (sh) S 4200 4242 4100 34816 4242 4194304 120 0 0 0 "
                            "17 5 30 12 20 0 3 0 987654 123456789 2560 18446744073709551615 1 1 0 0 "
                            "0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    BOOST_TEST(!parse_proc_stat(pipe_only)->children_reaped_by_kernel());
    // A line that ends after field 24 still parses (sigignore then reads as none).
    BOOST_TEST(parse_proc_stat("7 (x) R 1 7 7 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 100 9\n")
                   .has_value());
}

BOOST_AUTO_TEST_CASE(a_dying_process_is_not_live)
{
    // Field 9 (flags) 4194304 is PF_RANDOMIZE alone: live. With PF_EXITING (4) the process
    // is being torn down; zombies ('Z') and dead tasks ('X') are not live either.
    BOOST_TEST(parse_proc_stat(line)->flags == 4194304u);
    BOOST_TEST(parse_proc_stat(line)->live());
    const char* exiting = "4242 (sh) R 4200 4242 4100 34816 4242 4194308 120 0 0 0 "
                          "17 5 30 12 20 0 1 0 987654 123456789 2560\n";
    BOOST_TEST(!parse_proc_stat(exiting)->live());
    BOOST_TEST(!parse_proc_stat("7 (x) Z 1 7 7 0 -1 4194304 0 0 0 0 1 1 0 0 20 0 1 0 5 100 9\n")->live());
    BOOST_TEST(!parse_proc_stat("7 (x) X 1 7 7 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 100 9\n")->live());
    // Dying but asleep uninterruptibly in its exit: it may hold its pid for good, so it counts.
    BOOST_TEST(parse_proc_stat("7 (x) D 1 7 7 0 -1 4 0 0 0 0 1 1 0 0 20 0 1 0 5 100 9\n")->live());
    // A "zombie" leader whose other threads run (num_threads 3) is live.
    BOOST_TEST(parse_proc_stat("7 (x) Z 1 7 7 0 -1 0 0 0 0 0 1 1 0 0 20 0 3 0 5 100 9\n")->live());
}

BOOST_AUTO_TEST_CASE(a_zombie_is_one_whose_threads_have_all_ended)
{
    // The walk, the kill and the memory reads tell the two apart: the first has ended for
    // good, the second's main thread ended while two more threads run.
    auto dead = parse_proc_stat("7 (x) Z 1 7 7 0 -1 4194308 0 0 0 0 1 1 0 0 20 0 1 0 5 0 0\n");
    auto running = parse_proc_stat("7 (x) Z 1 7 7 0 -1 4194308 0 0 0 0 1 1 0 0 20 0 3 0 5 0 0\n");
    auto plain = parse_proc_stat(line);
    BOOST_TEST((dead->zombie() && !dead->main_thread_ended()));
    BOOST_TEST((!running->zombie() && running->main_thread_ended()));
    BOOST_TEST((!plain->zombie() && !plain->main_thread_ended()));
    // A main thread held up in its exit (PF_EXITING, asleep) while two more threads run.
    auto ending = parse_proc_stat("7 (x) S 1 7 7 0 -1 4194308 0 0 0 0 1 1 0 0 20 0 3 0 5 0 0\n");
    BOOST_TEST((ending->main_thread_ended() && ending->live() && !ending->zombie()));
    auto alone = parse_proc_stat("7 (x) S 1 7 7 0 -1 4194308 0 0 0 0 1 1 0 0 20 0 1 0 5 0 0\n");
    BOOST_TEST((!alone->main_thread_ended() && !alone->live()));
}

BOOST_AUTO_TEST_CASE(schedstat_runtime)
{
    using sandbox::detail::parse_schedstat_ns;
    BOOST_TEST((parse_schedstat_ns("250123456 1000 12\n") == std::optional<std::uint64_t>(250123456)));
    BOOST_TEST((parse_schedstat_ns("7") == std::optional<std::uint64_t>(7)));
    BOOST_TEST(!parse_schedstat_ns(""));
    BOOST_TEST(!parse_schedstat_ns("x 1 2\n"));
    BOOST_TEST(!parse_schedstat_ns("-5 1 2\n"));
}

BOOST_AUTO_TEST_CASE(rejects_malformed_text)
{
    BOOST_TEST(!parse_proc_stat(""));
    BOOST_TEST(!parse_proc_stat("12 (x) S 1 2"));
    BOOST_TEST(!parse_proc_stat("abc (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21"));
    BOOST_TEST(!parse_proc_stat("12 no parens S 1"));
    BOOST_TEST(!parse_proc_stat("-5 (x) R -1 5 5 0 -1 0 0 0 0 0 1 1 3 4 20 0 1 0 10 100 7 0"));
}

BOOST_AUTO_TEST_CASE(negative_child_times_clamp_to_zero)
{
    std::string s = "5 (x) R 1 5 5 0 -1 0 0 0 0 0 1 1 -3 -4 20 0 1 0 10 100 -7 0";
    auto st = parse_proc_stat(s);
    BOOST_TEST_REQUIRE(st.has_value());
    BOOST_TEST(st->cutime == 0u);
    BOOST_TEST(st->cstime == 0u);
    BOOST_TEST(st->rss_pages == 0u);
}

BOOST_AUTO_TEST_CASE(pid_lists)
{
    std::vector<pid_t> v;
    parse_pid_list("12 13 14 \n", v);
    parse_pid_list("", v);
    parse_pid_list("x 15", v);
    BOOST_TEST(v == (std::vector<pid_t>{12, 13, 14, 15}), boost::test_tools::per_element());
}


BOOST_AUTO_TEST_CASE(private_anonymous_memory_from_statm)
{
    using sandbox::detail::parse_statm_anon_bytes;
    // size resident shared text lib data dt: resident - shared pages.
    BOOST_TEST(parse_statm_anon_bytes("41000 33792 512 4 0 33000 0\n", 4096).value() ==
               (33792u - 512u) * 4096u);
    BOOST_TEST(parse_statm_anon_bytes("10 7 7 1 0 3 0", 4096).value() == 0u);
    // Fewer than three numbers, a word, shared above resident or an overflow: no value.
    BOOST_TEST(!parse_statm_anon_bytes("10 7", 4096).has_value());
    BOOST_TEST(!parse_statm_anon_bytes("10 x 2 1 0 3 0", 4096).has_value());
    BOOST_TEST(!parse_statm_anon_bytes("10 2 7 1 0 3 0", 4096).has_value());
    BOOST_TEST(!parse_statm_anon_bytes("1 18446744073709551615 0 0 0 0 0", 4096).has_value());
    BOOST_TEST(!parse_statm_anon_bytes("", 4096).has_value());
}

BOOST_AUTO_TEST_CASE(pss_from_smaps_rollup)
{
    using sandbox::detail::parse_pss_bytes;
    const std::string text = "55d1c0000000-7ffd00000000 ---p 00000000 00:00 0   [rollup]\n"
                             "Rss:                1692 kB\n"
                             "Pss:                 275 kB\n"
                             "Pss_Dirty:           112 kB\n";
    BOOST_TEST(parse_pss_bytes(text).value() == 275u * 1024);
    // Pss_Dirty is not Pss; a missing, malformed or overflowing value is no value.
    BOOST_TEST(!parse_pss_bytes("Pss_Dirty: 12 kB\n").has_value());
    BOOST_TEST(!parse_pss_bytes("Rss: 1 kB\n").has_value());
    BOOST_TEST(!parse_pss_bytes("Pss: x kB\n").has_value());
    BOOST_TEST(!parse_pss_bytes("Pss: 12 MB\n").has_value());
    BOOST_TEST(!parse_pss_bytes("Pss: 99999999999999999999 kB\n").has_value());
    BOOST_TEST(parse_pss_bytes("Pss: 0 kB").value() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
