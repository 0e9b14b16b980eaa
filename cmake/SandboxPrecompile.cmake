# sandbox_precompile(<target>...): the Asio, JSON and standard headers nearly every source of
# the library, the backends and the tools includes, parsed once per target into a precompiled
# header instead of once per source (docs/benchmarks.md, "Build and CI time": a source spends
# about a third of its compile time parsing them). PRIVATE: nothing of it reaches a consumer,
# and every public header still compiles on its own (test/header). A source that sets
# definitions of its own opts out with the source property SKIP_PRECOMPILE_HEADERS.
set(SANDBOX_PRECOMPILED_HEADERS
  <boost/asio/any_completion_handler.hpp>
  <boost/asio/any_io_executor.hpp>
  <boost/asio/as_tuple.hpp>
  <boost/asio/awaitable.hpp>
  <boost/asio/bind_cancellation_slot.hpp>
  <boost/asio/co_spawn.hpp>
  <boost/asio/experimental/awaitable_operators.hpp>
  <boost/asio/experimental/channel.hpp>
  <boost/asio/ip/tcp.hpp>
  <boost/asio/posix/stream_descriptor.hpp>
  <boost/asio/steady_timer.hpp>
  <boost/asio/this_coro.hpp>
  <boost/asio/use_awaitable.hpp>
  <boost/json/value.hpp>
  <boost/system/error_code.hpp>
  <chrono> <functional> <map> <memory> <optional> <string> <string_view> <vector>)

function(sandbox_precompile)
  foreach(target IN LISTS ARGN)
    target_precompile_headers(${target} PRIVATE ${SANDBOX_PRECOMPILED_HEADERS})
  endforeach()
endfunction()
