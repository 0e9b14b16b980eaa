// lib/exec/supervision.hpp: one supervised execution, the exec core, as seen from the
// caller's executor. Where it is lives in its phase machine (exec_phase.hpp): every event
// goes through feed(), which performs the actions the machine answers. Its member functions
// live in three files by concern:
//   supervise.cpp     the life cycle: cancellation, the ending, the result, completion
//   worker_wire.cpp   the worker: a channel from the service, the plan and the child's
//                     descriptors out, then a coroutine for the rest of the plan and the
//                     reports; kill/signal requests
//   output.cpp        the command's output, one coroutine per stream (capture under the
//                     cap, streaming, back-pressure), and a coroutine for its input
// The helper's other modes (status init, run-as, access-as) are in helper_modes.cpp and the
// rest of sandbox/backend/supervise.hpp in backend_entry.cpp.
#ifndef SANDBOX_LIB_EXEC_SUPERVISION_HPP
#define SANDBOX_LIB_EXEC_SUPERVISION_HPP

#include <sandbox/backend/supervise.hpp>

#include "exec/child_control.hpp"
#include "exec/exec_phase.hpp"
#include "exec/stdio.hpp"
#include "protocol/protocol.hpp"
#include "supervisor/client.hpp"

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace sandbox::backend {

// For the core's files (this header is private to lib/exec/).
namespace asio = boost::asio;
namespace proto = detail::proto;
using proto::end_reason;
// What the core's coroutines await with: the error as a value, never thrown.
inline constexpr auto with_error = asio::as_tuple(asio::use_awaitable);

class supervision final : public detail::child_control,
                          public std::enable_shared_from_this<supervision>
{
public:
    using clock = std::chrono::steady_clock;

    supervision(asio::any_io_executor ex, spawn_plan plan, supervise_handler h,
                detail::supervisor_service& svc, detail::spawned_fn on_spawned = {})
        : ex_(std::move(ex)), plan_(std::move(plan)), handler_(std::move(h)), svc_(svc),
          on_spawned_(std::move(on_spawned)), channel_(ex_),
          out_{asio::posix::stream_descriptor(ex_)}, err_{asio::posix::stream_descriptor(ex_)},
          in_(ex_)
    {}

    // A backend's resources for a command whose end was never reported (the caller went
    // away mid-run) go to the service, which lets them go once the helper that ran the tree
    // is reaped: the tree may still be running while its worker kills it (a write-deny
    // stand-in removed under a live sandbox would unmount it there).
    ~supervision()
    {
        if (plan_.tree_resources)
            svc_.keep_until_helper_gone(std::move(plan_.tree_resources));
    }

    void start();
    void on_channel(outcome<unique_fd> channel);

    // Keeps the handler's executor (which may belong to another execution context) from
    // running out of work while the operation is pending, as Asio operations do.
    void track_handler_work()
    {
        handler_work_ = asio::prefer(asio::get_associated_executor(handler_, ex_),
                                     asio::execution::outstanding_work.tracked);
    }

    void on_cancel(asio::cancellation_type t);

    int terminal_fd() const noexcept override
    {
        return machine_.phase() == detail::exec_phase::done ? -1 : terminal_fd_;
    }
    bool signal(int signo) override;
    void terminate(std::chrono::nanoseconds grace) override;

private:
    // One of the command's output streams; open until its coroutine (pump) ends it.
    struct stream
    {
        asio::posix::stream_descriptor d;
        stream_capture cap{};
        bool no_splice = false; // splice to /dev/null failed: over the cap, read and count
        bool paused = false;    // a chunk is with the on_output_async handler
    };
    // What a stream's coroutine does next.
    enum class round
    {
        wait,      ///< until the pipe is readable
        again,     ///< read at once (a resumed chunk)
        yield,     ///< read again after others had their turn
        hand_over, ///< give the chunk to on_output_async and wait for its resume
        to_null,   ///< over the cap: splice the rest to /dev/null
        end,       ///< the stream is over
    };

    bool capped() const { return plan_.caps.any(); }
    detail::exec_phase phase() const noexcept { return machine_.phase(); }
    void feed(const detail::exec_event& ev);
    outcome<bool> send_first(unique_fd channel);
    proto::plan plan_message();
    outcome<std::vector<int>> child_descriptors(const stdio_set& stdio, proto::plan& p,
                                                unique_fd& started);
    void keep_our_ends(stdio_set& stdio);
    // The core's coroutines hold it alive through their parameter: copied into the frame at
    // the call, before co_spawn's first post (a shared_from_this() inside would come too late:
    // nothing else may hold the core by then).
    asio::awaitable<void> talk_to_worker(std::shared_ptr<supervision> keep_alive);
    asio::awaitable<void> send_rest();
    bool take_messages();
    void on_report(const proto::message& m);
    void channel_done();
    void send_kill(const detail::kill_request& k);
    void read(stream& s);
    asio::awaitable<void> pump(std::shared_ptr<supervision> keep_alive, stream& s);
    round read_round(stream& s, std::string_view& chunk);
    bool reading_stopped() const noexcept;
    asio::awaitable<round> drain(stream& s);
    void end_stream(stream& s);
    bool capture(stream& s, std::string_view data);
    void deliver(stream& s, std::string_view data);
    output_stream stream_of(const stream& s) const noexcept;
    asio::awaitable<round> hand_over(stream& s, std::string_view data);
    void stop_output(std::string why);
    void arm_drain_timer();
    void abandon_pipes();
    asio::awaitable<void> feed_input(std::shared_ptr<supervision> keep_alive);
    void close_input();
    void finish(bool pipes_abandoned);
    exec_outcome ended(bool pipes_abandoned);
    exec_outcome outcome_from_report(bool pipes_abandoned,
                                     std::optional<int> wait_status = std::nullopt);
    exec_outcome setup_timed_out();
    exec_outcome wrapped_outcome(const std::string& err, bool pipes_abandoned);
    void fail(failure f);
    void complete(exec_outcome o);
    template <class Schedule> void deliver(exec_outcome o, Schedule schedule);

    asio::any_io_executor ex_;
    spawn_plan plan_;
    supervise_handler handler_;
    detail::supervisor_service& svc_;
    detail::spawned_fn on_spawned_;
    asio::posix::stream_descriptor channel_;
    std::string encoded_;
    std::size_t sent_ = 0;
    std::uint32_t cgroup_options_ = 0; // proto::opt_cgroup bits for the runner's setting
    // The phase and what the caller asked for: whether the plan is out, a kill waits, the
    // pipes were given up, the run is over (exec_phase.hpp).
    detail::exec_machine machine_;
    // How the worker's part ended, stored once: running until it is set (data for the
    // result; the machine's `worker_done` event marks the moment).
    struct running
    {
    };
    struct not_spawned // the worker could not start the command
    {
        int err;
        std::uint32_t stage; // proto::spawn_stage: the command's, the fork gate's, the cgroup's
    };
    struct worker_lost // the worker died (or spoke garbage) before it reported
    {
    };
    std::variant<running, proto::exit_report_msg, not_spawned, worker_lost> ending_;
    const proto::exit_report_msg* report() const noexcept
    {
        return std::get_if<proto::exit_report_msg>(&ending_);
    }
    std::string failure_text_;
    stream out_, err_;
    asio::posix::stream_descriptor in_;
    std::size_t input_off_ = 0;
    std::optional<asio::steady_timer> drain_timer_;
    clock::time_point started_{};
    int terminal_fd_ = -1; // the pseudo-terminal master while out_ holds it
    // Why the output handler stopped the run (it said stop, or threw); empty while it has not.
    std::string output_stop_text_;
    unique_fd devnull_;
    asio::any_completion_executor handler_work_;
};

} // namespace sandbox::backend

#endif // SANDBOX_LIB_EXEC_SUPERVISION_HPP
