// lib/process/tree.cpp: freeze-and-kill of a process tree found through /proc.
#include "process/tree.hpp"
#include "process/proc.hpp"

#include <algorithm>
#include <csignal>
#include <unordered_map>
#include <unordered_set>

#include <unistd.h>

namespace sandbox::detail {

namespace {

// Members of the tree in one /proc scan: the group, descendants of the leader, of the
// already-found members and of the known members (matched by start time).
void collect(pid_t leader, pid_t pgid, std::span<const known_process> known,
             std::unordered_set<pid_t>& members)
{
    std::vector<proc_stat> all;
    all.reserve(256);
    scan_all(all);
    std::unordered_map<pid_t, std::vector<pid_t>> children;
    const pid_t self = ::getpid();
    std::vector<pid_t> roots{leader};
    for (const auto& st : all)
    {
        if (st.pid == self || st.pid <= 1)
            continue;
        children[st.ppid].push_back(st.pid);
        if (st.pgrp == pgid)
            members.insert(st.pid);
        for (const auto& k : known)
            if (k.pid == st.pid && k.starttime == st.starttime)
                members.insert(st.pid);
    }
    roots.insert(roots.end(), members.begin(), members.end());
    while (!roots.empty())
    {
        pid_t p = roots.back();
        roots.pop_back();
        auto it = children.find(p);
        if (it == children.end())
            continue;
        for (pid_t c : it->second)
            if (members.insert(c).second)
                roots.push_back(c);
    }
}

} // namespace

std::size_t signal_tree(pid_t leader, pid_t pgid, std::span<const known_process> known, int sig,
                        bool scan)
{
    if (!scan)
    {
        if (pgid > 1)
            ::kill(-pgid, sig);
        for (const auto& k : known)
        {
            int err = 0;
            auto st = read_proc_stat(k.pid, err);
            if (st && st->starttime == k.starttime)
                ::kill(k.pid, sig);
        }
        return known.size();
    }
    std::unordered_set<pid_t> members;
    if (sig == SIGKILL)
    {
        // Freeze: stop everything found, then look again for children created meanwhile.
        std::size_t stopped = 0;
        for (int round = 0; round < 16; ++round)
        {
            collect(leader, pgid, known, members);
            if (pgid > 1)
                ::kill(-pgid, SIGSTOP);
            for (pid_t p : members)
                ::kill(p, SIGSTOP);
            if (round > 0 && members.size() == stopped)
                break;
            stopped = members.size();
        }
    }
    else
    {
        collect(leader, pgid, known, members);
    }
    if (pgid > 1)
        ::kill(-pgid, sig);
    for (pid_t p : members)
        ::kill(p, sig);
    if (sig == SIGKILL)
        return members.size();
    // A catchable signal must reach stopped members too.
    if (pgid > 1)
        ::kill(-pgid, SIGCONT);
    for (pid_t p : members)
        ::kill(p, SIGCONT);
    return members.size();
}

} // namespace sandbox::detail
