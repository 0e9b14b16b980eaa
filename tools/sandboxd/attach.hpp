// tools/sandboxd/attach.hpp: `GET /v1/sessions/{id}/attach`, a terminal session over a
// WebSocket (docs/sandboxd.md "Attach").
#ifndef SANDBOXD_ATTACH_HPP
#define SANDBOXD_ATTACH_HPP

#include "api.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/basic_stream.hpp>

#include <cstdint>
#include <memory>

namespace sandboxd {

using stream_type = boost::beast::basic_stream<boost::asio::local::stream_protocol>;

/// \brief Takes the connection over for a WebSocket attach to the terminal session `s`.
///
/// From the client: binary messages are keys (written to the terminal in order), text
/// messages are JSON controls: `{"type": "resize", "rows", "cols"}`, `{"type": "signal",
/// "signal": "interrupt"|...}`, `{"type": "close-input"}`. To the client: the terminal's
/// output from `offset` as binary messages, `{"type": "gap", "from", "resume_at"}` when the
/// log dropped bytes first, and at the end `{"type": "exit", "result"}` (or `{"type":
/// "closed"}`) followed by a normal close. A bad control message closes with 1008 (policy)
/// and the reason `validation: ...`. The session outlives the connection either way.
boost::asio::awaitable<void> attach(stream_type& stream, const request& req,
                                    std::shared_ptr<sandbox::session> s, std::uint64_t offset);

} // namespace sandboxd

#endif
