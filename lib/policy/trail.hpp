// lib/policy/trail.hpp: the audit records of one call (nothing is built without a sink).
#ifndef SANDBOX_LIB_POLICY_TRAIL_HPP
#define SANDBOX_LIB_POLICY_TRAIL_HPP

#include <sandbox/error.hpp>
#include <sandbox/failure.hpp>
#include <sandbox/policy/audit.hpp>

#include <boost/system/error_code.hpp>

#include <memory>
#include <optional>
#include <string>

namespace sandbox::detail {

class trail
{
public:
    trail() = default;
    trail(std::shared_ptr<audit_sink> sink, std::uint64_t call, call_kind kind,
          const std::string& command, const std::vector<std::string>& args,
          const std::string& work_dir, bool tty, const std::string& session_id);

    bool active() const noexcept { return sink_ != nullptr; }
    /// A final record (denied, refused, finished) was written.
    bool closed() const noexcept { return closed_; }
    /// Writes a record (one that cannot be written is counted by the sink).
    void note(audit_event e, std::string layer, std::string reason = {},
              const boost::system::error_code& ec = {});
    /// Writes a record the run depends on (`approved`, `allowed`: written before anything
    /// runs); the failure (`errc::internal`) when it cannot be written.
    [[nodiscard]] std::optional<failure> vouch(audit_event e, std::string layer,
                                               std::string reason = {});
    void started(const std::string& session_id);
    /// Names the chain in every record (a config document's sandbox).
    void name(const std::string& chain) { proto_.sandbox = chain; }
    void requested_by(const std::optional<requester>& who) { proto_.requested_by = who; }
    /// Names the instance the call runs in (or opens) in every record.
    void instance(const std::string& id)
    {
        proto_.instance_id = id;
        if (net_proto_)
            net_proto_->instance_id = id;
    }
    /// How a call that reached the backend ended: `finished` when it ran (a result, or an
    /// error with a partial result), `refused` when the backend refused it.
    void ended(const exec_result* result, const boost::system::error_code& ec,
               const std::string& message);
    /// The same, from the exception in flight (rethrown by the caller).
    void ended(std::exception_ptr ep);

    /// The egress proxy's records of this call go to the trail (as `connection` and
    /// `connection_closed`), then to `next` (the caller's own handler, if any). A record
    /// that cannot be written is counted by the sink; the connection is already decided.
    net_record_handler net_handler(net_record_handler next);

    /// Refuses the call: records `denied` at `layer`; returns the failure
    /// (`policy_denied`, the layer as its rule) the call ends with.
    [[nodiscard]] failure deny(const char* layer, std::string message);

private:
    audit_record base(audit_event e, std::string layer) const;
    boost::system::error_code write(audit_event e, std::string layer, std::string reason,
                                    const boost::system::error_code& ec);
    std::shared_ptr<audit_sink> sink_;
    bool closed_ = false;
    audit_record proto_{};
    /// What the network records start from, shared with `net_handler`'s handler so that a
    /// session's id (known once it started) reaches them.
    std::shared_ptr<audit_record> net_proto_{};
};

} // namespace sandbox::detail

#endif // SANDBOX_LIB_POLICY_TRAIL_HPP
