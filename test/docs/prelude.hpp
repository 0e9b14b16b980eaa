// test/docs/prelude.hpp: what a fragment of the docs may use without declaring it. Each C++
// block of README.md and docs/*.md that is not a whole program becomes the body of a
// coroutine whose parameters are SBX_DOC_PARAMETERS (extract_blocks.py), so the
// names below stand for the reader's own objects. Compiled, never run.
#ifndef SBX_TEST_DOCS_PRELUDE_HPP
#define SBX_TEST_DOCS_PRELUDE_HPP

#include <sandbox/backend/cap_watch.hpp>
#include <sandbox/bwrap_runner.hpp>
#include <sandbox/config/document.hpp>
#include <sandbox/config/registry.hpp>
#include <sandbox/instance.hpp>
#include <sandbox/local_runner.hpp>
#include <sandbox/policy.hpp>
#include <sandbox/process_manager.hpp>
#include <sandbox/runner.hpp>
#include <sandbox/session.hpp>
#include <sandbox/with_diagnostics.hpp>
#include <sandbox/worker_pool.hpp>

#include <boost/asio.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

/// The reader's own approver (docs/policy.md, "Approval").
inline asio::awaitable<sandbox::approval_decision> my_approver(sandbox::approval_request)
{
    co_return sandbox::approval_decision{};
}

/// The reader's own backend factory (docs/config.md).
std::unique_ptr<sandbox::runner> make_my_runner(asio::any_io_executor ex, std::string root,
                                                const boost::json::value& settings);

/// The reader's own log.
template <class... T> void log(T&&...) {}

namespace sbx_doc {

/// A user interface that asks a person (docs/policy.md).
struct approval_ui
{
    asio::awaitable<sandbox::approval_decision> ask(sandbox::approval_request rq);
};

} // namespace sbx_doc

/// The objects a fragment uses as if the reader had them at hand: the parameters of the
/// coroutine that a fragment becomes (its own declarations hide them).
#define SBX_DOC_PARAMETERS                                                                         \
    [[maybe_unused]] asio::io_context &ioc, [[maybe_unused]] asio::any_io_executor ex,             \
        [[maybe_unused]] sandbox::runner &runner,                  /* any backend */               \
        [[maybe_unused]] sandbox::exec_request req,                /* a request built earlier */   \
        [[maybe_unused]] std::unique_ptr<sandbox::runner> backend, /* to wrap in a chain */        \
        [[maybe_unused]] std::shared_ptr<sandbox::session> shell,  /* a running session */         \
        [[maybe_unused]] pid_t child_pid,                          /* a process one started */     \
        [[maybe_unused]] std::filesystem::path root,               /* where commands work */       \
        [[maybe_unused]] sandbox::local_runner_options opts,       /* a backend's options */       \
        [[maybe_unused]] std::shared_ptr<sbx_doc::approval_ui> ui

#endif // SBX_TEST_DOCS_PRELUDE_HPP
