// sandbox/with_diagnostics.hpp: a completion-token adapter that turns an error code into a
// `sandbox::error` exception carrying the diagnostics and the partial result.
#ifndef SANDBOX_WITH_DIAGNOSTICS_HPP
#define SANDBOX_WITH_DIAGNOSTICS_HPP

#include <sandbox/error.hpp>
#include <sandbox/exec_result.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/system/error_code.hpp>
#include <boost/version.hpp>

#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

namespace sandbox {

/// \brief Adapts a completion token so that a failed operation completes with an exception
/// instead of an error code: `void(error_code, Args...)` becomes
/// `void(std::exception_ptr, Args...)`.
///
/// The exception is a `sandbox::error`. When the operation delivers an `exec_result`, the
/// error carries its `diag` and the whole result as `partial_result()` (the output captured
/// before a timeout, a budget kill or a cancellation), and the handler still receives the
/// result as its second argument. For the other operations of the library (sessions) the
/// error carries the diagnostics the operation left for it (`detail::diagnostics_sink`);
/// any other operation gets `ec.message()`. This is the default token of `async_exec` and of
/// every session front end, wrapped around `boost::asio::deferred`; wrap any other token the
/// same way (as the outermost adapter)
/// (`with_diagnostics(boost::asio::use_awaitable)`, `with_diagnostics(use_future)`).
/// Modelled on Boost.MySQL's `with_diagnostics`. Associated executor, allocator and
/// cancellation slot are those of the wrapped handler.
template <class CompletionToken>
class with_diagnostics_t
{
public:
    constexpr with_diagnostics_t() = default;

    template <class T>
        requires(!std::is_same_v<std::decay_t<T>, with_diagnostics_t>)
    constexpr explicit with_diagnostics_t(T&& token) : token_(std::forward<T>(token))
    {
    }

    CompletionToken token_{};
};

/// \brief Makes a `with_diagnostics_t` from a token: `with_diagnostics(use_awaitable)`.
struct with_diagnostics_fn
{
    template <class CompletionToken>
    constexpr auto operator()(CompletionToken&& token) const
    {
        return with_diagnostics_t<std::decay_t<CompletionToken>>(
            std::forward<CompletionToken>(token));
    }
};
inline constexpr with_diagnostics_fn with_diagnostics{};

namespace detail {

/// \brief Where a failing operation leaves its diagnostics for the token adapter that asked
/// for them (null: none asked). The compiled half of every front end fills it before it calls
/// the handler with an error code.
using diagnostics_sink = std::shared_ptr<diagnostics>;

/// The exception for a failed completion: with the diagnostics and partial result of an
/// `exec_result` argument when there is one, else with the diagnostics the operation left.
inline std::exception_ptr make_diagnostic_error(const boost::system::error_code& ec,
                                                const diagnostics*, const exec_result& r)
{
    return std::make_exception_ptr(error(ec, r.diag, r));
}

template <class... Args>
std::exception_ptr make_diagnostic_error(const boost::system::error_code& ec,
                                         const diagnostics* left, const Args&...)
{
    diagnostics d;
    if (left && !left->empty())
        d = *left;
    else
        d.message = ec.message();
    return std::make_exception_ptr(error(ec, std::move(d)));
}

template <class Handler>
class with_diagnostics_handler
{
public:
    template <class H>
    explicit with_diagnostics_handler(H&& h)
        : handler_(std::forward<H>(h)), sink_(std::make_shared<diagnostics>())
    {
    }

    template <class... Args>
    void operator()(boost::system::error_code ec, Args&&... args)
    {
        std::exception_ptr ep;
        if (ec)
            ep = make_diagnostic_error(ec, sink_.get(), args...);
        std::move(handler_)(std::move(ep), std::forward<Args>(args)...);
    }

    Handler handler_;
    diagnostics_sink sink_;
};

/// The sink of a handler made by `with_diagnostics`, looked for through Asio's binders; null
/// for any other handler.
template <class Handler>
diagnostics_sink diagnostics_sink_of(const Handler&) noexcept
{
    return nullptr;
}

template <class Handler>
diagnostics_sink diagnostics_sink_of(const with_diagnostics_handler<Handler>& h) noexcept
{
    return h.sink_;
}

template <class Handler, class Executor>
diagnostics_sink diagnostics_sink_of(const boost::asio::executor_binder<Handler, Executor>& h) noexcept
{
    return diagnostics_sink_of(h.get());
}

template <class Handler, class Slot>
diagnostics_sink diagnostics_sink_of(
    const boost::asio::cancellation_slot_binder<Handler, Slot>& h) noexcept
{
    return diagnostics_sink_of(h.get());
}

/// \brief The one template behind every `async_*` front end (the Asio `type_erasure`
/// example's shape): it erases the handler into an `any_completion_handler<Signature>` and
/// calls the compiled `impl(args..., sink, handler)`.
template <class Signature, class CompletionToken, class Impl, class... Args>
auto initiate_erased(Impl* impl, CompletionToken&& token, Args&&... args)
{
    return boost::asio::async_initiate<CompletionToken, Signature>(
        [](auto handler, Impl* f, auto... a) {
            diagnostics_sink sink = diagnostics_sink_of(handler);
            f(std::move(a)..., std::move(sink),
              boost::asio::any_completion_handler<Signature>(std::move(handler)));
        },
        token, impl, std::forward<Args>(args)...);
}

template <class Signature>
struct with_diagnostics_signature
{
    using type = Signature; // not an error-code signature: left as it is
};

template <class R, class... Args>
struct with_diagnostics_signature<R(boost::system::error_code, Args...)>
{
    using type = R(std::exception_ptr, Args...);
};

} // namespace detail
} // namespace sandbox

template <class CompletionToken, class Signature>
struct boost::asio::async_result<sandbox::with_diagnostics_t<CompletionToken>, Signature>
    : boost::asio::async_result<
          CompletionToken, typename sandbox::detail::with_diagnostics_signature<Signature>::type>
{
    using base = boost::asio::async_result<
        CompletionToken, typename sandbox::detail::with_diagnostics_signature<Signature>::type>;

    template <class Initiation>
    struct init_wrapper
    {
        Initiation initiation_;

        template <class Handler, class... Args>
        void operator()(Handler&& handler, Args&&... args)
        {
            std::move(initiation_)(sandbox::detail::with_diagnostics_handler<
                                       std::decay_t<Handler>>(std::forward<Handler>(handler)),
                                   std::forward<Args>(args)...);
        }
    };

    template <class Initiation, class RawCompletionToken, class... Args>
    static auto initiate(Initiation&& initiation, RawCompletionToken&& token, Args&&... args)
    {
        // async_initiate, not base::initiate: some tokens (use_future) have only the older
        // handler-type interface. The inner token keeps the outer one's value category: a
        // const or reused lvalue token is copied from, never moved from.
        using inner_ref = decltype((std::forward<RawCompletionToken>(token).token_));
        using inner = std::conditional_t<std::is_rvalue_reference_v<inner_ref>,
                                         std::remove_reference_t<inner_ref>, inner_ref>;
        return boost::asio::async_initiate<
            inner, typename sandbox::detail::with_diagnostics_signature<Signature>::type>(
            init_wrapper<std::decay_t<Initiation>>{std::forward<Initiation>(initiation)},
            token.token_, std::forward<Args>(args)...);
    }
};

template <template <class, class> class Associator, class Handler, class DefaultCandidate>
struct boost::asio::associator<Associator, sandbox::detail::with_diagnostics_handler<Handler>,
                               DefaultCandidate> : Associator<Handler, DefaultCandidate>
{
    static typename Associator<Handler, DefaultCandidate>::type
    get(const sandbox::detail::with_diagnostics_handler<Handler>& h) noexcept
    {
        return Associator<Handler, DefaultCandidate>::get(h.handler_);
    }

    static auto get(const sandbox::detail::with_diagnostics_handler<Handler>& h,
                    const DefaultCandidate& c) noexcept
        -> decltype(Associator<Handler, DefaultCandidate>::get(h.handler_, c))
    {
        return Associator<Handler, DefaultCandidate>::get(h.handler_, c);
    }
};

namespace sandbox::detail {
/// True for the value types of the library's operations: `co_await` of one of them through
/// `with_diagnostics(...)` needs the Boost 1.81 fix below. Each header adds its own types.
template <class T>
inline constexpr bool resumes_with_exception = false;
template <>
inline constexpr bool resumes_with_exception<exec_result> = true;
} // namespace sandbox::detail

#if BOOST_VERSION <= 108100
// Boost 1.81 cannot resume a coroutine from an operation whose signature is
// `void(std::exception_ptr, T)`: its handler tests `*result` where it means `*result.ex_`,
// which does not compile (asio/impl/awaitable.hpp:956). This specialization, for the value
// types of this library only, resumes correctly (rethrows the exception, else returns the
// value), so `co_await async_exec(...)`, `co_await async_read(...)` and the other front ends
// work with their default token.
template <class T, class Executor>
    requires sandbox::detail::resumes_with_exception<T>
class boost::asio::detail::awaitable_async_op_handler<void(std::exception_ptr, T), Executor>
    : public boost::asio::detail::awaitable_thread<Executor>
{
public:
    struct result_type
    {
        std::exception_ptr* ex_ = nullptr;
        T* value_ = nullptr;
    };

    awaitable_async_op_handler(awaitable_thread<Executor>* h, result_type& result)
        : awaitable_thread<Executor>(std::move(*h)), result_(result)
    {
    }

    void operator()(std::exception_ptr ex, T value)
    {
        result_.ex_ = &ex;
        result_.value_ = &value;
        this->entry_point()->top_of_stack_->attach_thread(this);
        this->entry_point()->top_of_stack_->clear_cancellation_slot();
        this->pump();
    }

    static T resume(result_type& result)
    {
        if (*result.ex_)
            std::rethrow_exception(std::exchange(*result.ex_, nullptr));
        return std::move(*result.value_);
    }

private:
    result_type& result_;
};
#endif

#endif // SANDBOX_WITH_DIAGNOSTICS_HPP
