#!/usr/bin/env python3
"""sandboxd against hostile clients and hostile commands (issue 32): reloads mid-call, clients
that go away, floods of connections and sessions, followers that never read, commands that
dial the daemon, descriptor exhaustion, refused commands, audit correlation.
Usage: hostile_test.py SANDBOXD SANDBOX_RUN [unittest args]"""
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_test  # noqa: E402  (the Daemon fixture, clients and process helpers)
from daemon_test import Daemon, alive, children_of, wait_gone  # noqa: E402

SANDBOX_RUN = None

BWRAP_BOX = """  walled:
    backend: bwrap
    root: @DIR@/ws
"""


def raw_request(sock_path, text, timeout=10):
    """Sends `text` on a new connection and returns everything until the daemon closes.
    A daemon out of descriptors answers 503 and closes as soon as it accepts, perhaps before
    the request is sent: the send then fails (EPIPE) but the answer is still there to read."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        try:
            s.sendall(text.encode())
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered early: read what the daemon said
        data = b""
        while True:
            part = s.recv(65536)
            if not part:
                return data
            data += part


def status_of(answer):
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


class Fixture(unittest.TestCase):
    allow = ""

    def setUp(self):
        self.d = Daemon(self.allow)
        self.pids = []

    def tearDown(self):
        pid = self.d.proc.pid
        self.d.stop()
        for p in self.pids:
            self.assertTrue(wait_gone(p, 10), f"pid {p} outlived the daemon")
        self.assertFalse(os.path.exists(self.d.dir))
        self.assertNotIn(pid, children_of(os.getpid()))

    def rewrite(self, old, new):
        with open(self.d.doc) as f:
            text = f.read()
        self.assertIn(old, text)
        with open(self.d.doc + ".new", "w") as f:
            f.write(text.replace(old, new))
        os.replace(self.d.doc + ".new", self.d.doc)

    def reload(self):
        self.d.reload(self)

    def exec_in_thread(self, sandbox, body):
        got = {}

        def run():
            got["r"] = self.d.request("POST", f"/v1/sandboxes/{sandbox}/exec", body)

        th = threading.Thread(target=run)
        th.start()
        return th, got

    def wait_file(self, path, seconds=10):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                with open(path) as f:
                    text = f.read()
                if text.endswith("\n"):
                    return text.strip()
            except FileNotFoundError:
                pass
            time.sleep(0.02)
        self.fail(f"{path} was not written")

    def add_bwrap_box(self, root):
        """A bwrap sandbox "walled" over `root` (made reachable for the sandbox user)."""
        os.chmod(self.d.dir, 0o755)  # the sandbox user (nobody, for a root daemon) reaches it
        os.chmod(root, 0o777)
        self.rewrite("sandboxes:\n", "sandboxes:\n" + BWRAP_BOX.replace("@DIR@/ws", root))
        self.reload()

    def plain_file(self):
        plain = os.path.join(self.d.root, "plain")
        with open(plain, "w") as f:
            f.write("not a program\n")
        os.chmod(plain, 0o644)
        return plain


class HostileTest(Fixture):
    # -- 1: a reload under a running exec ----------------------------------------------------
    def test_reload_that_removes_or_rebuilds_the_sandbox_under_an_exec(self):
        for new_name in ("renamed", "box"):  # removed (renamed), then rebuilt with its name
            marker = os.path.join(self.d.root, "started")
            th, got = self.exec_in_thread("box", {
                "command": "sh", "args": ["-c", f"echo $$ > {marker}; sleep 1; echo done"]})
            self.pids.append(int(self.wait_file(marker)))
            if new_name != "box":
                self.rewrite("\n  box:\n", f"\n  {new_name}:\n")
            self.reload()
            th.join(30)
            self.assertFalse(th.is_alive())
            status, r = got["r"]
            self.assertEqual((status, r["status"], r["stdout"]), (200, "exited", "done\n"), r)
            self.assertEqual(r["backend"], "local")
            self.assertIsNone(self.d.proc.poll(), self.d.log())
            os.unlink(marker)
            if new_name != "box":
                self.rewrite(f"\n  {new_name}:\n", "\n  box:\n")
                self.reload()

    def test_reload_under_a_session_start_keeps_the_session_working(self):
        # The start waits for its approval ("guarded": rm* needs one) while a reload removes
        # the sandbox; it is then approved and must start on the runner it began with.
        got = {}

        def start():
            got["r"] = self.d.request("POST", "/v1/sandboxes/guarded/sessions",
                                      {"command": "rm", "args": ["-i", "/nonexistent"]})

        th = threading.Thread(target=start)
        th.start()
        pending, end = [], time.monotonic() + 10
        while not pending and time.monotonic() < end:
            pending = self.d.request("GET", "/v1/approvals")[1]["approvals"]
            time.sleep(0.02)
        self.assertEqual(len(pending), 1)
        self.rewrite("\n  guarded:\n", "\n  gone:\n")
        self.reload()
        self.assertEqual(self.d.request("POST", f"/v1/approvals/{pending[0]['id']}",
                                        {"decision": "allow"})[0], 200)
        th.join(30)
        status, s = got["r"]
        self.assertEqual(status, 201, s)
        self.pids.append(s["pid"])
        self.assertIsNone(self.d.proc.poll(), self.d.log())
        sid = s["id"]
        self.assertEqual(self.d.request("POST", f"/v1/sessions/{sid}/close-input")[0], 200)
        status, r = self.d.request("POST", f"/v1/sessions/{sid}/wait")
        self.assertEqual((status, r["status"], r["exit_code"]), (200, "exited", 1), r)
        self.assertEqual(self.d.request("DELETE", f"/v1/sessions/{sid}")[0], 200)

    # -- 9: a client that goes away cancels its exec -----------------------------------------
    def test_a_client_that_goes_away_cancels_its_exec(self):
        marker = os.path.join(self.d.root, "pid")
        c = self.d.conn()
        c.request("POST", "/v1/sandboxes/box/exec", body=json.dumps({
            "command": "sh", "args": ["-c", f"sleep 60 & echo $! > {marker}; wait"]}))
        pid = int(self.wait_file(marker))
        self.pids.append(pid)
        self.assertTrue(alive(pid))
        c.close()  # gone without an answer
        self.assertTrue(wait_gone(pid, 10), "the exec's tree outlived its client")
        end = time.monotonic() + 5
        while time.monotonic() < end and not any(
                a.get("event") == "client_gone" for a in self.d.audit()):
            time.sleep(0.05)
        gone = [a for a in self.d.audit() if a.get("event") == "client_gone"]
        self.assertEqual(len(gone), 1, self.d.audit())
        self.assertEqual(gone[0]["sandbox"], "box")
        self.assertIn("cancelled", [a.get("status") for a in self.d.audit()
                                    if a.get("event") == "finished"])
        self.assertEqual(self.d.request("GET", "/v1/sandboxes")[0], 200)

    # -- 17, 16: a command that cannot start -------------------------------------------------
    def session_refusal(self, sandbox, command):
        """The error of a session whose command cannot start: from the start's answer, or
        (when the OS refused it only after the answer) from the session's exit."""
        st, r = self.d.request("POST", f"/v1/sandboxes/{sandbox}/sessions", {"command": command})
        if st != 201:
            return st, r["error"]
        self.pids.append(r["pid"])
        status, w = self.d.request("POST", f"/v1/sessions/{r['id']}/wait")
        self.assertEqual((status, w["status"]), (200, "not_started"), w)
        info = self.d.request("GET", f"/v1/sessions/{r['id']}")[1]
        self.assertEqual(info["exit"]["error"]["code"], w["error"]["code"])
        self.assertEqual(self.d.request("DELETE", f"/v1/sessions/{r['id']}")[0], 200)
        return {"not_found": 404, "forbidden": 403}.get(w["error"]["code"], 0), w["error"]

    def check_refused_sessions(self, sandbox, plain):
        for command, status, code in (("/nonexistent/cmd", 404, "not_found"),
                                      (plain, 403, "forbidden")):
            st, e = self.session_refusal(sandbox, command)
            self.assertEqual((st, e["code"], e["limit"]), (status, code, "command"), e)
            self.assertIn(os.path.basename(command), e["message"])

    def test_a_session_whose_command_cannot_start_is_refused_with_the_reason(self):
        plain = self.plain_file()
        self.check_refused_sessions("box", plain)
        self.assertEqual(self.d.request("GET", "/v1/sessions")[1]["sessions"], [])

    @unittest.skipUnless(shutil.which("bwrap"), "bubblewrap is not installed")
    def test_a_bwrap_session_whose_command_cannot_start_tells_the_reason(self):
        plain = self.plain_file()
        self.add_bwrap_box(self.d.root)
        self.check_refused_sessions("walled", plain)

    def check_connect_refusals(self, sandbox, plain):
        for command, want in (("/nonexistent/cmd", 127), (plain, 126)):
            local = subprocess.run([SANDBOX_RUN, "--backend", "local", "--root", self.d.root,
                                    "--", command], capture_output=True, text=True, timeout=60,
                                   stdin=subprocess.DEVNULL)
            remote = subprocess.run([SANDBOX_RUN, "--connect", self.d.sock, "--sandbox", sandbox,
                                     "--", command], capture_output=True, text=True, timeout=60,
                                    stdin=subprocess.DEVNULL)
            self.assertEqual(local.returncode, want, local.stderr)
            self.assertEqual(remote.returncode, want, remote.stderr)
            self.assertIn(os.path.basename(command), remote.stderr)
            self.assertIn("not_found" if want == 127 else "forbidden", remote.stderr)

    def test_connect_runs_of_commands_that_cannot_start_match_a_local_run(self):
        self.check_connect_refusals("box", self.plain_file())

    @unittest.skipUnless(shutil.which("bwrap"), "bubblewrap is not installed")
    def test_connect_runs_in_bwrap_of_commands_that_cannot_start_match_a_local_run(self):
        plain = self.plain_file()
        self.add_bwrap_box(self.d.root)
        self.check_connect_refusals("walled", plain)

    # -- 15, 18: the command-line client and the daemon's own statuses -----------------------
    def test_connect_to_a_missing_or_non_socket_path_exits_125_at_once(self):
        for path in (os.path.join(self.d.dir, "missing.sock"), self.d.doc):
            for extra in ([], ["--json"]):
                t0 = time.monotonic()
                p = subprocess.run([SANDBOX_RUN, "--connect", path, "--sandbox", "box"] + extra +
                                   ["--", "true"], capture_output=True, text=True, timeout=20,
                                   stdin=subprocess.DEVNULL)
                self.assertEqual(p.returncode, 125, p.stderr)
                self.assertIn(path, p.stderr)
                self.assertLess(time.monotonic() - t0, 10)

    def test_sandboxd_help_names_its_exit_statuses(self):
        p = subprocess.run([daemon_test.SANDBOXD, "--help"], capture_output=True, text=True,
                           timeout=20)
        self.assertEqual(p.returncode, 0)
        for line in ("Exit status:", "  0  stopped by SIGTERM", "  1  could not start",
                     "  2  bad command line"):
            self.assertIn(line, p.stdout)
        bad = subprocess.run([daemon_test.SANDBOXD, "--no-such-flag"], capture_output=True,
                             timeout=20)
        self.assertEqual(bad.returncode, 2)
        missing = subprocess.run([daemon_test.SANDBOXD, "--config", "/nonexistent.yaml",
                                  "--listen", os.path.join(self.d.dir, "x.sock")],
                                 capture_output=True, timeout=20)
        self.assertEqual(missing.returncode, 1)

    # -- 3: a command cannot be the daemon's operator ----------------------------------------
    def test_a_local_command_that_dials_the_daemon_is_refused(self):
        status, r = self.d.request("POST", "/v1/sandboxes/box/exec", {
            "command": "curl", "args": ["-sS", "--unix-socket", self.d.sock,
                                        "http://sandboxd/v1/approvals"]})
        self.assertEqual(status, 200, r)
        body = json.loads(r["stdout"])
        self.assertEqual(body["error"]["code"], "forbidden", r)
        self.assertIn("started by this daemon", body["error"]["message"])
        # A grandchild that left its parent (orphaned to the tree's reaper) is refused too.
        status, r = self.d.request("POST", "/v1/sandboxes/box/exec", {
            "command": "sh", "args": ["-c",
                                      f"(setsid curl -sS --unix-socket {self.d.sock} "
                                      f"http://sandboxd/v1/sessions > out.json &) ; sleep 1; "
                                      "cat out.json"]})
        self.assertEqual(json.loads(r["stdout"])["error"]["code"], "forbidden", r)
        refused = [a for a in self.d.audit() if a.get("event") == "refused"]
        self.assertEqual(len(refused), 2, refused)
        self.assertEqual(refused[0]["reason"], "peer is a command of this daemon")

    @unittest.skipUnless(shutil.which("bwrap"), "bubblewrap is not installed")
    def test_a_bwrap_command_does_not_see_the_daemon_socket(self):
        # The socket outside /tmp and /run (the sandbox has its own of each), in a directory
        # the sandbox sees read-only: only hiding it keeps it out of reach.
        outside = tempfile.mkdtemp(prefix="sandboxd-hostile-", dir="/var/tmp")
        self.addCleanup(shutil.rmtree, outside, True)
        os.chmod(outside, 0o755)  # searchable by the sandbox user: visible unless hidden
        self.d.proc.send_signal(signal.SIGTERM)
        self.d.proc.wait(30)
        self.d.sock = os.path.join(outside, "d.sock")
        self.d.start()
        self.add_bwrap_box(self.d.root)
        status, r = self.d.request("POST", "/v1/sandboxes/walled/exec", {
            "command": "sh", "args": ["-c", f"test -S {self.d.sock} && echo visible || echo hidden; "
                                            f"curl -sS --unix-socket {self.d.sock} "
                                            "http://sandboxd/v1/sessions; echo rc=$?"]})
        self.assertEqual(status, 200, r)
        self.assertTrue(r["stdout"].startswith("hidden\n"), r)
        self.assertNotIn("sessions", r["stdout"])
        self.assertNotIn("rc=0", r["stdout"])

    # -- 4: another uid's commands do not run as the daemon's user unless the config says so
    def as_uid(self, uid, method, path, body=None):
        """One request from a child process running as `uid`: (status, JSON answer)."""
        return tuple(daemon_test.as_uid(uid, lambda: self.d.request(method, path, body,
                                                                     timeout=20)))

    @unittest.skipUnless(os.geteuid() == 0, "needs root to act as another uid")
    def test_a_local_sandbox_runs_another_uids_commands_only_with_run_as_daemon(self):
        os.chmod(self.d.dir, 0o755)
        os.chmod(self.d.sock, 0o666)
        self.rewrite("daemon:\n", "daemon:\n  allow_uids: [65534]\n")
        self.reload()
        marker = os.path.join(self.d.root, "ran")
        call = {"command": "sh", "args": ["-c", f"id -u > {marker}"]}
        for path in ("/v1/sandboxes/box/exec", "/v1/sandboxes/box/sessions"):
            status, r = self.as_uid(65534, "POST", path, call)
            self.assertEqual((status, r["error"]["code"]), (403, "forbidden"), r)
            self.assertIn("run_as: daemon", r["error"]["message"])
        self.assertFalse(os.path.exists(marker))  # nothing ran as root for uid 65534
        listed = self.as_uid(65534, "GET", "/v1/sandboxes")[1]["sandboxes"]
        self.assertEqual({b["name"]: b["run_as"] for b in listed}["box"], "caller")
        self.rewrite("  box:\n    backend: local\n", "  box:\n    backend: local\n    run_as: daemon\n")
        self.reload()
        status, r = self.as_uid(65534, "POST", "/v1/sandboxes/box/exec", call)
        self.assertEqual((status, r["status"]), (200, "exited"), r)
        with open(marker) as f:
            self.assertEqual(f.read().strip(), str(os.geteuid()))  # said, and so it is
        checked = subprocess.run([SANDBOX_RUN, "--config", self.d.doc, "--check"],
                                 capture_output=True, text=True, timeout=60,
                                 stdin=subprocess.DEVNULL)
        runs = {json.loads(x)["name"]: json.loads(x)["run_as"] for x in checked.stdout.splitlines()}
        self.assertEqual((runs["box"], runs["quick"]), ("daemon", "caller"), checked.stderr)

    # -- 10: the approver sees what would run and who asks ----------------------------------
    def test_an_approval_shows_the_environment_input_network_and_sandbox(self):
        th, got = self.exec_in_thread("guarded", {
            "command": "rm", "args": ["-f", "nothing"], "stdin": "secret input",
            "env": {"inject": {"LD_PRELOAD": "/tmp/evil.so", "BASH_ENV": "/tmp/rc"}},
            "net": {"mode": "deny_all"}})
        pending, end = [], time.monotonic() + 10
        while not pending and time.monotonic() < end:
            pending = self.d.request("GET", "/v1/approvals")[1]["approvals"]
            time.sleep(0.05)
        self.assertEqual(len(pending), 1, pending)
        a = pending[0]
        self.assertEqual(a["sandbox"], "guarded")
        self.assertEqual(a["env"]["inject"], {"LD_PRELOAD": "/tmp/evil.so", "BASH_ENV": "/tmp/rc"})
        self.assertEqual(a["input"], {"bytes": 12, "truncated": False, "head": "secret input"})
        self.assertEqual(a["net"]["mode"], "deny_all")
        self.assertEqual((a["command"], a["args"]), ("rm", ["-f", "nothing"]))
        # Who asks: this process, by its socket's credentials.
        self.assertEqual(a["requested_by"],
                         {"uid": os.geteuid(), "gid": os.getegid(), "pid": os.getpid()})
        self.assertEqual(self.d.request("POST", f"/v1/approvals/{a['id']}",
                                        {"decision": "deny"})[0], 200)
        th.join(30)
        self.assertEqual(got["r"][0], 403, got["r"])
        # The audit trail names the requester in every record of the call.
        mine = [x for x in self.d.audit() if x.get("command") == "rm"]
        self.assertTrue(mine)
        for x in mine:
            self.assertEqual(x["requested_by"]["pid"], os.getpid(), x)

    # -- 12: audit correlation ---------------------------------------------------------------
    def test_every_record_names_its_sandbox_and_call_numbers_do_not_repeat(self):
        for sandbox in ("box", "quick", "box"):
            self.assertEqual(self.d.request("POST", f"/v1/sandboxes/{sandbox}/exec",
                                            {"command": "true"})[0], 200)
        self.reload()
        self.assertEqual(self.d.request("POST", "/v1/sandboxes/box/exec",
                                        {"command": "true"})[0], 200)
        records = self.d.audit()
        calls = {}
        for a in records:
            self.assertIn("time", a, a)
            self.assertNotIn("time_ms", a, a)
            if "call" in a:
                self.assertIn(a["sandbox"], ("box", "quick"), a)
                calls.setdefault(a["call"], set()).add(a["sandbox"])
            elif a.get("event") == "request" and "/sandboxes/" in a["target"]:
                self.assertIn(a["sandbox"], ("box", "quick"), a)
        self.assertEqual(len(calls), 4, records)  # four calls, four numbers
        self.assertTrue(all(len(v) == 1 for v in calls.values()))
        # A restarted daemon appending to the same file does not reuse a number.
        self.d.proc.send_signal(signal.SIGTERM)
        self.d.proc.wait(30)
        self.d.start()
        self.assertEqual(self.d.request("POST", "/v1/sandboxes/box/exec",
                                        {"command": "true"})[0], 200)
        after = {a["call"] for a in self.d.audit() if "call" in a}
        self.assertEqual(len(after), 5)


    # -- 8: a follower that does not read ----------------------------------------------------
    def test_a_follower_that_does_not_read_is_dropped(self):
        st, s = self.d.request("POST", "/v1/sandboxes/box/sessions",
                               {"command": "sh", "args": ["-c", "while :; do echo "
                                                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa; done"]})
        self.assertEqual(st, 201, s)
        self.pids.append(s["pid"])
        f = socket.socket(socket.AF_UNIX)
        f.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        f.connect(self.d.sock)
        f.sendall(f"GET /v1/sessions/{s['id']}/output?follow=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                  .encode())
        time.sleep(4)  # idle_timeout is 1 s: a line waits longer than that to be taken
        f.settimeout(10)
        ended = False
        try:
            while f.recv(1 << 20):
                pass
            ended = True
        except (socket.timeout, ConnectionResetError):
            ended = not isinstance(sys.exc_info()[1], socket.timeout)
        f.close()
        self.assertTrue(ended, "the stalled follower was not dropped")
        self.assertEqual(self.d.request("POST", f"/v1/sessions/{s['id']}/terminate",
                                        {"grace": "0s"})[0], 200)
        self.assertEqual(self.d.request("DELETE", f"/v1/sessions/{s['id']}")[0], 200)


class BoundsTest(Fixture):
    allow = ("  max_connections_per_uid: 6\n  max_sessions_per_uid: 3\n  max_sessions: 4\n"
             "  session_output_budget: 25MiB\n")

    # -- 2: connections one uid may hold -----------------------------------------------------
    def test_connections_per_uid_are_bounded_and_the_next_is_told_why(self):
        held = []
        for _ in range(6):
            s = socket.socket(socket.AF_UNIX)
            s.connect(self.d.sock)
            held.append(s)
        time.sleep(0.2)  # all six accepted
        answer = raw_request(self.d.sock, "GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(status_of(answer), 429, answer)
        body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
        self.assertEqual(body["error"]["limit"], "daemon.max_connections_per_uid")
        held.pop().close()
        time.sleep(0.2)
        self.assertEqual(self.d.request("GET", "/v1/sandboxes")[0], 200)
        for s in held:
            s.close()

    # -- 7: sessions and their output logs ---------------------------------------------------
    def test_sessions_per_uid_and_the_output_budget_are_bounded(self):
        ids = []
        for _ in range(2):  # 2 x 10 MiB reserved of 25 MiB
            st, s = self.d.request("POST", "/v1/sandboxes/box/sessions", {"command": "cat"})
            self.assertEqual(st, 201, s)
            self.pids.append(s["pid"])
            ids.append(s["id"])
        st, r = self.d.request("POST", "/v1/sandboxes/box/sessions", {"command": "cat"})
        self.assertEqual((st, r["error"]["limit"]), (503, "daemon.session_output_budget"), r)
        st, s = self.d.request("POST", "/v1/sandboxes/box/sessions",
                               {"command": "cat", "resources": {"max_output_bytes": "1MiB"}})
        self.assertEqual(st, 201, s)
        self.pids.append(s["pid"])
        ids.append(s["id"])
        st, r = self.d.request("POST", "/v1/sandboxes/box/sessions",
                               {"command": "cat", "resources": {"max_output_bytes": "1MiB"}})
        self.assertEqual((st, r["error"]["limit"]), (429, "daemon.max_sessions_per_uid"), r)
        self.assertEqual(r["error"]["code"], "budget_exceeded")
        self.assertEqual(self.d.request("DELETE", f"/v1/sessions/{ids.pop()}")[0], 200)
        st, s = self.d.request("POST", "/v1/sandboxes/box/sessions",
                               {"command": "cat", "resources": {"max_output_bytes": "1MiB"}})
        self.assertEqual(st, 201, s)
        self.pids.append(s["pid"])
        ids.append(s["id"])
        for sid in ids:
            self.assertEqual(self.d.request("DELETE", f"/v1/sessions/{sid}")[0], 200)
        self.assertTrue(any(a.get("event") == "session_refused" for a in self.d.audit()))

    def test_starts_waiting_together_do_not_pass_the_session_bound(self):
        # Five starts at once that each wait for an approval ("guarded": rm* needs one): the
        # first three are counted as they wait, the other two refused at once. Before, none
        # was counted until it started, so all five waited (and would all have run).
        got = [None] * 5

        def start(i):
            got[i] = self.d.request("POST", "/v1/sandboxes/guarded/sessions",
                                    {"command": "rm", "args": ["-f", f"nothing{i}"],
                                     "resources": {"max_output_bytes": "1MiB"}})

        threads = [threading.Thread(target=start, args=(i,)) for i in range(5)]
        for th in threads:
            th.start()
        end = time.monotonic() + 10
        while sum(g is not None for g in got) < 2 and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(0.3)  # any start that was wrongly admitted is asking by now
        pending = self.d.request("GET", "/v1/approvals")[1]["approvals"]
        self.assertEqual(len(pending), 3, pending)
        refused = [g for g in got if g is not None]
        self.assertEqual(len(refused), 2, got)
        for st, r in refused:
            self.assertEqual((st, r["error"]["limit"]), (429, "daemon.max_sessions_per_uid"), r)
        for a in pending:
            self.assertEqual(self.d.request("POST", f"/v1/approvals/{a['id']}",
                                            {"decision": "deny"})[0], 200)
        for th in threads:
            th.join(30)
        self.assertTrue(all(g is not None and g[0] in (403, 429) for g in got), got)
        # Denied starts give their places back.
        st, s = self.d.request("POST", "/v1/sandboxes/box/sessions",
                               {"command": "cat", "resources": {"max_output_bytes": "1MiB"}})
        self.assertEqual(st, 201, s)
        self.pids.append(s["pid"])
        self.assertEqual(self.d.request("DELETE", f"/v1/sessions/{s['id']}")[0], 200)


class DescriptorTest(unittest.TestCase):
    """A daemon whose descriptor table is full still answers (503) and recovers."""

    def test_a_full_descriptor_table_is_answered_and_the_daemon_recovers(self):
        def small_table():
            resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))

        d = Daemon.__new__(Daemon)
        original = subprocess.Popen

        def popen_with_limit(*a, **kw):
            kw["preexec_fn"] = small_table
            return original(*a, **kw)

        subprocess.Popen = popen_with_limit
        try:
            Daemon.__init__(d, "  max_connections_per_uid: 1000\n")
        finally:
            subprocess.Popen = original
        try:
            flood = []
            try:
                for _ in range(60):  # more than the table holds
                    s = socket.socket(socket.AF_UNIX)
                    flood.append(s)
                    s.connect(d.sock)
                time.sleep(0.5)
                answer = raw_request(d.sock, "GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertEqual(status_of(answer), 503, answer)
                self.assertIn(b"out of file descriptors", answer)
                self.assertTrue(any(a.get("reason") == "out of descriptors" for a in d.audit()))
            finally:
                for s in flood:
                    s.close()
            time.sleep(0.5)
            status, r = d.request("POST", "/v1/sandboxes/box/exec", {"command": "true"})
            self.assertEqual((status, r["status"]), (200, "exited"), r)
            self.assertIn("descriptor limit 48", d.log())
        finally:
            d.stop()



class TunnelBudgetTest(Fixture):
    # -- 2: a sandbox's tunnels count against its own budget, not the daemon's descriptors --
    def test_a_sandbox_spends_its_tunnel_budget_not_the_daemons(self):
        held = []
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        port = listener.getsockname()[1]
        stop = threading.Event()

        def hold():  # the destination: accepts and keeps every connection, never answers
            listener.settimeout(0.1)
            while not stop.is_set():
                try:
                    held.append(listener.accept()[0])
                except OSError:
                    pass

        th = threading.Thread(target=hold)
        th.start()
        self.addCleanup(lambda: (stop.set(), th.join(), listener.close(),
                                 [c.close() for c in held]))
        root = tempfile.mkdtemp(prefix="sandboxd-tunnels-", dir=self.d.dir)
        os.chmod(self.d.dir, 0o755)
        os.chmod(root, 0o777)
        self.rewrite("sandboxes:\n", "sandboxes:\n" + f"""  tunnels:
    backend: bwrap
    root: {root}
    settings:
      max_sandbox_tunnels: 6
    defaults:
      net:
        mode: allow_list
        rules:
          - {{action: allow, host: 127.0.0.1, port: {port}}}
""")
        self.reload()
        # Ten tunnels kept open at once: the first six are connected, the rest refused.
        script = (
            "import os, socket\n"
            "port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])\n"
            "kept = []\n"
            "for i in range(10):\n"
            "    s = socket.create_connection(('127.0.0.1', port))\n"
            f"    s.sendall(b'CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\n\\r\\n')\n"
            "    print(s.recv(12).decode().split(' ')[1], flush=True)\n"
            "    kept.append(s)\n")
        status, r = self.d.request("POST", "/v1/sandboxes/tunnels/exec", {
            "command": "/usr/bin/python3", "args": ["-c", script]})
        self.assertEqual(status, 200, r)
        self.assertEqual(r["stdout"].split(), ["200"] * 6 + ["503"] * 4, r)
        capped = [a["net"] for a in self.d.audit()
                  if a.get("net", {}).get("reason") == "tunnel_cap"]
        self.assertEqual(len(capped), 4, capped)
        self.assertTrue(all(c.get("rule") == "max_sandbox_tunnels 6" for c in capped), capped)
        # Every share came back: the next exec of the sandbox gets its six again.
        status, r = self.d.request("POST", "/v1/sandboxes/tunnels/exec", {
            "command": "/usr/bin/python3", "args": ["-c", script]})
        self.assertEqual(r["stdout"].split(), ["200"] * 6 + ["503"] * 4, r)


def main():
    global SANDBOX_RUN
    if len(sys.argv) < 3:
        sys.exit("usage: hostile_test.py SANDBOXD SANDBOX_RUN [unittest args]")
    daemon_test.SANDBOXD = os.path.abspath(sys.argv.pop(1))
    SANDBOX_RUN = os.path.abspath(sys.argv.pop(1))
    daemon_test.run_suite()


if __name__ == "__main__":
    main()
