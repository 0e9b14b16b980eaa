// lib/policy/compose.cpp: the decorator factories and the composed local chain.
#include <sandbox/policy/decorators.hpp>
#include <sandbox/policy/predicates.hpp>

#include "policy/policy_runner.hpp"

namespace sandbox {

using detail::chain_layers;
using detail::policy_runner;

std::unique_ptr<runner> allow_commands(std::unique_ptr<runner> inner,
                                       std::vector<std::string> names, command_match match)
{
    chain_layers l;
    l.allowed = std::move(names);
    l.match = match;
    return std::make_unique<policy_runner>(std::move(inner), std::move(l));
}

std::unique_ptr<runner> with_defaults(std::unique_ptr<runner> inner, exec_options defaults)
{
    chain_layers l;
    l.defaults = std::move(defaults);
    return std::make_unique<policy_runner>(std::move(inner), std::move(l));
}

std::unique_ptr<runner> with_approval(std::unique_ptr<runner> inner, approval_options approval)
{
    chain_layers l;
    l.approval = std::move(approval);
    return std::make_unique<policy_runner>(std::move(inner), std::move(l));
}

std::unique_ptr<runner> with_audit(std::unique_ptr<runner> inner, std::shared_ptr<audit_sink> sink)
{
    chain_layers l;
    l.audit = std::move(sink);
    return std::make_unique<policy_runner>(std::move(inner), std::move(l));
}

std::unique_ptr<runner> compose_local(std::unique_ptr<runner> backend, local_policy policy)
{
    chain_layers l;
    l.defaults = std::move(policy.defaults);
    if (!policy.approval.predicates.empty())
        l.approval = std::move(policy.approval);
    l.allowed = std::move(policy.allowed_commands);
    l.match = policy.match;
    l.audit = std::move(policy.audit);
    l.name = std::move(policy.name);
    l.call_numbers = std::move(policy.call_numbers);
    return std::make_unique<policy_runner>(std::move(backend), std::move(l));
}

local_policy default_local_policy(const std::filesystem::path& root, approver ask,
                                  std::vector<std::string> sensitive)
{
    local_policy p;
    p.approval.ask = std::move(ask);
    p.approval.predicates.push_back(work_dir_outside_root(root));
    p.approval.predicates.push_back(net_non_default());
    if (!sensitive.empty())
        p.approval.predicates.push_back(command_patterns(std::move(sensitive)));
    return p;
}

} // namespace sandbox
