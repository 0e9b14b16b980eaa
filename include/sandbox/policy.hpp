// sandbox/policy.hpp: the policy chain (command gate, defaults, approval, audit trail).
#ifndef SANDBOX_POLICY_HPP
#define SANDBOX_POLICY_HPP

#include <sandbox/policy/audit.hpp>
#include <sandbox/policy/call.hpp>
#include <sandbox/policy/decorators.hpp>
#include <sandbox/policy/predicates.hpp>

#endif // SANDBOX_POLICY_HPP
