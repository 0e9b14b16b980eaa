#!/usr/bin/env python3
"""sandboxd driven by real clients: curl --unix-socket, Python's http.client over AF_UNIX,
and sandbox-run --connect. Usage: sandboxd_test.py SANDBOXD SANDBOX_RUN"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import websocket  # python3-websocket (websocket-client): a real WebSocket client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_test import alive, as_uid, end_process, wait_gone  # noqa: E402  (one /proc reader for both suites)
import daemon_test  # noqa: E402  (read_pty_until)

SANDBOXD = SANDBOX_RUN = None


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("sandboxd", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Daemon:
    def __init__(self, doc_text, extra_env=None):
        self.dir = tempfile.mkdtemp(prefix="sbx-sandboxd-test-")
        os.chmod(self.dir, 0o755)
        self.root = os.path.join(self.dir, "ws")
        os.mkdir(self.root)
        self.sock = os.path.join(self.dir, "d.sock")
        self.doc = os.path.join(self.dir, "d.yaml")
        self.audit = os.path.join(self.dir, "audit.jsonl")
        self.write(doc_text)
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.proc = subprocess.Popen([SANDBOXD, "--config", self.doc, "--listen", self.sock],
                                     stdin=subprocess.DEVNULL, stderr=self.log)
        end = time.time() + 10
        while not os.path.exists(self.sock):
            if time.time() > end or self.proc.poll() is not None:
                raise RuntimeError("sandboxd did not start: " + self.logtext())
            time.sleep(0.02)

    def write(self, text):
        with open(self.doc, "w") as f:
            f.write(text.replace("@ROOT@", self.root).replace("@AUDIT@", self.audit))

    def logtext(self):
        self.log.seek(0)
        return self.log.read()

    def request(self, method, path, body=None, raw=False, timeout=30):
        c = UnixConnection(self.sock, timeout)
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        c.request(method, path, body=data)
        r = c.getresponse()
        text = r.read()
        c.close()
        return r.status, (text if raw else json.loads(text))

    def curl(self, *args):
        p = subprocess.run(["curl", "-s", "--unix-socket", self.sock, "-w", "\n%{http_code}",
                            *args], capture_output=True, text=True, timeout=60)
        body, _, code = p.stdout.rpartition("\n")
        return int(code), body

    def stop(self):
        if self.proc.poll() is None:
            end_process(self.proc)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


DOC = """version: v1
daemon:
  audit_file: @AUDIT@
  max_body_bytes: 4KiB
  idle_timeout: 2s
sandboxes:
  build:
    backend: local
    run_as: daemon
    root: @ROOT@
    defaults:
      timeout: 30s
      env: {allow: [PATH], inject: {CI: "yes"}}
  guarded:
    backend: local
    root: @ROOT@
    approval: {sensitive_commands: ["rm*"], deadline: 1500ms}
"""


class SandboxdTest(unittest.TestCase):
    def setUp(self):
        self.d = Daemon(DOC)

    def tearDown(self):
        self.d.stop()

    def start(self, body, sandbox="build"):
        status, s = self.d.request("POST", f"/v1/sandboxes/{sandbox}/sessions", body)
        self.assertEqual(status, 201, s)
        return s

    def test_list_names_the_sandboxes_with_their_enforcement(self):
        code, body = self.d.curl("http://d/v1/sandboxes")
        self.assertEqual(code, 200)
        boxes = {b["name"]: b for b in json.loads(body)["sandboxes"]}
        self.assertEqual(set(boxes), {"build", "guarded"})
        self.assertEqual(boxes["build"]["backend"], "local")
        self.assertTrue(boxes["build"]["enforcement"]["env_allow_list"])

    def test_exec_runs_under_the_sandbox_defaults(self):
        code, body = self.d.curl("-X", "POST", "http://d/v1/sandboxes/build/exec", "-d",
                                 json.dumps({"command": "sh", "args": ["-c", "echo $CI; pwd; exit 3"]}))
        self.assertEqual(code, 200)
        r = json.loads(body)
        self.assertEqual(r["exit_code"], 3)
        self.assertEqual(r["stdout"], "yes\n" + os.path.realpath(self.d.root) + "\n")
        self.assertEqual(r["status"], "exited")

    def test_a_timeout_is_a_result(self):
        status, r = self.d.request("POST", "/v1/sandboxes/build/exec",
                                   {"command": "sleep", "args": ["10"], "timeout": "300ms"})
        self.assertEqual(status, 200)
        self.assertEqual(r["status"], "timed_out")

    def test_bad_calls_are_classified(self):
        status, r = self.d.request("POST", "/v1/sandboxes/build/exec", {"command": "true", "timeout": 5})
        self.assertEqual(status, 400)
        self.assertEqual(r["error"]["code"], "validation")
        self.assertIn("timeout", r["error"]["message"])
        status, r = self.d.request("POST", "/v1/sandboxes/build/exec", {"command": "true", "bogus": 1})
        self.assertEqual(status, 400)
        self.assertIn("bogus", r["error"]["message"])
        status, r = self.d.request("POST", "/v1/sandboxes/nope/exec", {"command": "true"})
        self.assertEqual((status, r["error"]["code"]), (404, "not_found"))
        status, r = self.d.request("GET", "/v1/nothing")
        self.assertEqual(status, 404)
        code, body = self.d.curl("-X", "POST", "http://d/v1/sandboxes/build/exec", "--data-binary",
                                 "x" * 5000)
        self.assertEqual(code, 413)
        # The daemon is still there.
        self.assertEqual(self.d.request("GET", "/v1/sandboxes")[0], 200)

    def test_a_session_takes_input_and_is_replayed_after_reconnecting(self):
        s = self.start({"command": "cat"})
        sid = s["id"]
        status, _ = self.d.request("POST", f"/v1/sessions/{sid}/input", b"hello\nworld\n")
        self.assertEqual(status, 200)
        # First client: long-poll until both lines are there, then go away.
        got, at = "", 0
        while len(got) < 12:
            status, out = self.d.request("GET", f"/v1/sessions/{sid}/output?offset={at}&wait=2000")
            self.assertEqual(status, 200)
            got += "".join(c["data"] for c in out["chunks"])
            at = out["next"]
        self.assertEqual(got, "hello\nworld\n")
        # A new connection replays from 0 and from a saved offset.
        status, out = self.d.request("GET", f"/v1/sessions/{sid}/output?offset=0")
        self.assertEqual("".join(c["data"] for c in out["chunks"]), "hello\nworld\n")
        status, out = self.d.request("GET", f"/v1/sessions/{sid}/output?offset=6")
        self.assertEqual("".join(c["data"] for c in out["chunks"]), "world\n")
        status, lst = self.d.request("GET", "/v1/sessions")
        self.assertIn(sid, [x["id"] for x in lst["sessions"]])
        self.assertEqual(self.d.request("POST", f"/v1/sessions/{sid}/close-input")[0], 200)
        status, r = self.d.request("POST", f"/v1/sessions/{sid}/wait")
        self.assertEqual((status, r["exit_code"]), (200, 0))
        status, info = self.d.request("GET", f"/v1/sessions/{sid}")
        self.assertFalse(info["running"])
        self.assertEqual(self.d.request("DELETE", f"/v1/sessions/{sid}")[0], 200)
        self.assertEqual(self.d.request("GET", f"/v1/sessions/{sid}")[0], 404)

    def test_a_client_chooses_its_session_id_and_a_duplicate_is_409(self):
        # Issue 33, item 9: "id" in the start body; unique across the daemon's sandboxes.
        s = self.start({"id": "job-42.a", "command": "cat"})
        self.assertEqual(s["id"], "job-42.a")
        status, r = self.d.request("POST", "/v1/sandboxes/build/sessions",
                                   {"id": "job-42.a", "command": "cat"})
        self.assertEqual((status, r["error"]["code"]), (409, "conflict"), r)
        self.assertIn("in use", r["error"]["message"])
        status, r = self.d.request("POST", "/v1/sandboxes/guarded/sessions",
                                   {"id": "job-42.a", "command": "cat"})
        self.assertEqual(status, 409, r)
        for bad in ["", "has space", "x" * 129, 7]:
            status, r = self.d.request("POST", "/v1/sandboxes/build/sessions",
                                       {"id": bad, "command": "cat"})
            self.assertEqual((status, r["error"]["code"]), (400, "validation"), (bad, r))
        status, r = self.d.request("POST", "/v1/sandboxes/build/exec", {"id": "e1", "command": "true"})
        self.assertEqual((status, r["error"]["code"]), (400, "validation"), r)
        # The first session is untouched by the refusals; once closed, its id is free again.
        self.assertEqual(self.d.request("POST", "/v1/sessions/job-42.a/input", b"still\n")[0], 200)
        self.assertEqual(self.d.request("POST", "/v1/sessions/job-42.a/close-input")[0], 200)
        status, r = self.d.request("POST", "/v1/sessions/job-42.a/wait")
        self.assertEqual((status, r["exit_code"]), (200, 0))
        status, out = self.d.request("GET", "/v1/sessions/job-42.a/output?offset=0")
        self.assertEqual("".join(c["data"] for c in out["chunks"]), "still\n")
        self.assertEqual(self.d.request("DELETE", "/v1/sessions/job-42.a")[0], 200)
        again = self.start({"id": "job-42.a", "command": "true"})
        self.assertEqual(again["id"], "job-42.a")

    def test_signal_terminate_and_resize(self):
        s = self.start({"command": "sleep", "args": ["100"]})
        status, r = self.d.request("POST", f"/v1/sessions/{s['id']}/signal", {"signal": "bogus"})
        self.assertEqual(status, 400)
        status, r = self.d.request("POST", f"/v1/sessions/{s['id']}/resize", {"rows": 10, "cols": 20})
        self.assertEqual((status, r["error"]["code"]), (501, "not_available"))  # pipes
        self.assertEqual(self.d.request("POST", f"/v1/sessions/{s['id']}/signal",
                                        {"signal": "terminate"})[0], 200)
        status, r = self.d.request("POST", f"/v1/sessions/{s['id']}/wait")
        self.assertEqual((r["status"], r["signal"]), ("signaled", 15))
        self.assertTrue(wait_gone(s["pid"]))
        t = self.start({"command": "sleep", "args": ["100"], "tty": {"rows": 30, "cols": 100}})
        self.assertTrue(t["tty"])
        self.assertEqual(self.d.request("POST", f"/v1/sessions/{t['id']}/resize",
                                        {"rows": 40, "cols": 120})[0], 200)
        status, r = self.d.request("POST", f"/v1/sessions/{t['id']}/terminate", {"grace": "0s"})
        self.assertEqual(status, 200)
        self.assertTrue(wait_gone(t["pid"]))

    def test_a_dropped_offset_is_a_sequence_gap(self):
        s = self.start({"command": "head", "args": ["-c", "1000000", "/dev/zero"],
                        "resources": {"max_output_bytes": "64KiB"}})
        self.d.request("POST", f"/v1/sessions/{s['id']}/wait")
        status, r = self.d.request("GET", f"/v1/sessions/{s['id']}/output?offset=0")
        self.assertEqual((status, r["error"]["code"]), (409, "sequence_gap"))
        resume = r["error"]["resume_at"]
        self.assertGreater(resume, 0)
        status, out = self.d.request("GET", f"/v1/sessions/{s['id']}/output?offset={resume}&max=10000000")
        self.assertEqual(status, 200)
        self.assertEqual(sum(len(c["data"]) for c in out["chunks"]), 1000000 - resume)

    def test_follow_streams_ndjson_until_the_exit(self):
        s = self.start({"command": "sh", "args": ["-c", "echo a; sleep 0.2; echo b; exit 4"]})
        p = subprocess.run(["curl", "-sN", "--unix-socket", self.d.sock,
                            f"http://d/v1/sessions/{s['id']}/output?follow=1&offset=0"],
                           capture_output=True, text=True, timeout=30)
        lines = [json.loads(x) for x in p.stdout.splitlines()]
        self.assertEqual("".join(x.get("data", "") for x in lines if x["type"] == "output"), "a\nb\n")
        self.assertEqual(lines[-1]["type"], "exit")
        self.assertEqual(lines[-1]["result"]["exit_code"], 4)

    def test_terminal_output_is_tagged_tty_in_json_and_ndjson(self):
        # Issue 33, item 8: a pty's merged output is neither stdout nor stderr.
        t = self.start({"command": "sh", "args": ["-c", "echo out; echo err >&2"], "tty": True})
        status, r = self.d.request("POST", f"/v1/sessions/{t['id']}/wait")
        self.assertEqual((status, r["exit_code"]), (200, 0))
        status, out = self.d.request("GET", f"/v1/sessions/{t['id']}/output?offset=0")
        self.assertEqual(status, 200)
        self.assertEqual({c["stream"] for c in out["chunks"]}, {"tty"})
        self.assertIn("err", "".join(c["data"] for c in out["chunks"]))
        p = subprocess.run(["curl", "-sN", "--unix-socket", self.d.sock,
                            f"http://d/v1/sessions/{t['id']}/output?follow=1&offset=0"],
                           capture_output=True, text=True, timeout=30)
        lines = [json.loads(x) for x in p.stdout.splitlines()]
        self.assertEqual({x["stream"] for x in lines if x["type"] == "output"}, {"tty"})
        pipes = self.start({"command": "sh", "args": ["-c", "echo out; echo err >&2"]})
        self.d.request("POST", f"/v1/sessions/{pipes['id']}/wait")
        status, out = self.d.request("GET", f"/v1/sessions/{pipes['id']}/output?offset=0")
        self.assertEqual({c["stream"] for c in out["chunks"]}, {"stdout", "stderr"})

    def test_approvals_answered_denied_and_timed_out(self):
        def pending():
            end = time.time() + 5
            while time.time() < end:
                a = self.d.request("GET", "/v1/approvals")[1]["approvals"]
                if a:
                    return a[0]
                time.sleep(0.05)
            self.fail("no approval appeared")

        def ask():
            return subprocess.Popen(["curl", "-s", "--unix-socket", self.d.sock, "-w", "\n%{http_code}",
                                     "-X", "POST", "http://d/v1/sandboxes/guarded/exec", "-d",
                                     json.dumps({"command": "rm", "args": ["-f", "x"]})],
                                    stdout=subprocess.PIPE, text=True)

        p = ask()
        a = pending()
        self.assertEqual(a["command"], "rm")
        self.assertEqual(self.d.request("POST", f"/v1/approvals/{a['id']}", {"decision": "allow"})[0], 200)
        out = p.communicate(timeout=30)[0]
        self.assertTrue(out.endswith("\n200"), out)
        self.assertEqual(json.loads(out.rpartition("\n")[0])["exit_code"], 0)
        p = ask()
        a = pending()
        self.assertEqual(self.d.request("POST", f"/v1/approvals/{a['id']}", {"decision": "deny"})[0], 200)
        out = p.communicate(timeout=30)[0]
        self.assertTrue(out.endswith("\n403"), out)
        p = ask()
        pending()
        out = p.communicate(timeout=30)[0]  # nobody answers: the deadline denies
        self.assertTrue(out.endswith("\n403"), out)
        self.assertIn("deadline", out)
        self.assertEqual(self.d.request("POST", "/v1/approvals/999", {"decision": "allow"})[0], 404)
        # A command that needs no approval is not asked about.
        self.assertEqual(self.d.request("POST", "/v1/sandboxes/guarded/exec", {"command": "true"})[0], 200)

    def test_a_sighup_as_soon_as_the_socket_exists_is_a_reload(self):
        # The socket is made after the signals are caught: a SIGHUP sent the moment it
        # appears reloads, it does not end the daemon (it did, 1 start in 25 on a busy host,
        # when the handlers came after the listener: the client saw a reset).
        for _ in range(10):
            d = Daemon(DOC)
            try:
                d.proc.send_signal(signal.SIGHUP)
                status, body = d.request("GET", "/v1/sandboxes")
                self.assertEqual(status, 200, body)
                end = time.time() + 10
                while "reloaded" not in d.logtext() and time.time() < end:
                    time.sleep(0.02)
                self.assertIn("reloaded", d.logtext())
                self.assertIsNone(d.proc.poll())
            finally:
                d.stop()

    def test_the_socket_appears_listening_and_a_live_one_is_not_taken(self):
        # The socket is bound under another name and renamed once it listens: a client that
        # waits for the file and connects at once is never refused (it was, under ASan on a
        # busy host, between bind and listen). A second daemon on a live socket fails as a
        # bind there would, and leaves the first one's socket and no file of its own.
        for _ in range(10):
            d = Daemon(DOC)  # (it returns as soon as the file exists)
            try:
                self.assertEqual(d.request("GET", "/v1/sandboxes")[0], 200)
            finally:
                d.stop()
        second = subprocess.run([SANDBOXD, "--config", self.d.doc, "--listen", self.d.sock],
                                stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=60)
        self.assertNotEqual(second.returncode, 0)
        self.assertIn("cannot listen on " + self.d.sock, second.stderr)
        self.assertIn("in use", second.stderr)
        self.assertEqual(self.d.request("GET", "/v1/sandboxes")[0], 200)
        self.assertEqual(sorted(n for n in os.listdir(self.d.dir) if n.startswith(".sandboxd.")), [])

    def test_reload_with_a_good_and_a_bad_document(self):
        self.d.write(DOC + "  extra:\n    backend: local\n    root: @ROOT@\n")
        self.d.proc.send_signal(signal.SIGHUP)
        end = time.time() + 5
        while time.time() < end:
            names = [b["name"] for b in self.d.request("GET", "/v1/sandboxes")[1]["sandboxes"]]
            if "extra" in names:
                break
            time.sleep(0.05)
        self.assertIn("extra", names)
        self.d.write("version: v1\nsandboxes: {broken: {backend: local}}\n")
        self.d.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        self.assertIsNone(self.d.proc.poll())
        names = [b["name"] for b in self.d.request("GET", "/v1/sandboxes")[1]["sandboxes"]]
        self.assertIn("extra", names)
        self.assertIn("reload failed", self.d.logtext())

    def test_sigterm_ends_live_sessions_and_exits_0(self):
        s = self.start({"command": "sleep", "args": ["100"]})
        self.assertTrue(alive(s["pid"]))
        self.d.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.d.proc.wait(30), 0)
        self.assertTrue(wait_gone(s["pid"]))
        self.assertFalse(os.path.exists(self.d.sock))

    def test_sigkill_of_the_daemon_leaves_no_process(self):
        s = self.start({"command": "sh", "args": ["-c", "sleep 100 & sleep 100"]})
        self.assertTrue(alive(s["pid"]))
        self.d.proc.kill()
        self.d.proc.wait()
        self.assertTrue(wait_gone(s["pid"], 15))

    def test_a_uid_not_on_the_list_is_refused_until_listed(self):
        os.chmod(self.d.sock, 0o666)

        def as_nobody():
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                try:
                    os.setgid(65534)
                    os.setuid(65534)
                    c = UnixConnection(self.d.sock, 10)
                    c.request("GET", "/v1/sandboxes")
                    os.write(w, str(c.getresponse().status).encode())
                finally:
                    os._exit(0)
            os.close(w)
            status = os.read(r, 16).decode()
            os.close(r)
            os.waitpid(pid, 0)
            return int(status)

        self.assertEqual(as_nobody(), 403)
        with open(self.d.audit) as f:
            self.assertIn('"event":"refused"', f.read())
        self.d.write(DOC.replace("  idle_timeout: 2s\n", "  idle_timeout: 2s\n  allow_uids: [65534]\n"))
        self.d.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        self.assertEqual(as_nobody(), 200)

    def as_uid(self, uid, method, path, body=None):
        """One request from a child process running as `uid`: (status, JSON answer)."""
        def call():
            c = UnixConnection(self.d.sock, 10)
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data)
            res = c.getresponse()
            return [res.status, res.read().decode()]

        status, text = as_uid(uid, call)
        return status, json.loads(text) if text else None

    def test_a_session_is_used_only_by_its_owner_and_the_operator(self):
        os.chmod(self.d.sock, 0o666)
        self.d.write(DOC.replace("  idle_timeout: 2s\n", "  idle_timeout: 2s\n  allow_uids: [65534]\n"))
        self.d.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        ours = self.start({"command": "cat"})
        sid = ours["id"]
        # Another allowed uid neither sees nor touches the daemon's (root's) session.
        self.assertEqual(self.as_uid(65534, "GET", "/v1/sessions")[1]["sessions"], [])
        for method, path, body in [("GET", f"/v1/sessions/{sid}", None),
                                   ("GET", f"/v1/sessions/{sid}/output?offset=0", None),
                                   ("GET", f"/v1/sessions/{sid}/output?offset=0&follow=1", None),
                                   ("POST", f"/v1/sessions/{sid}/input", "x"),
                                   ("POST", f"/v1/sessions/{sid}/terminate", {"grace": "0s"}),
                                   ("DELETE", f"/v1/sessions/{sid}", None)]:
            status, r = self.as_uid(65534, method, path, body)
            self.assertEqual((status, r["error"]["code"]), (403, "forbidden"), path)
        # Nor answers approvals (a user could approve their own command).
        status, r = self.as_uid(65534, "GET", "/v1/approvals")
        self.assertEqual((status, r["error"]["code"]), (403, "forbidden"))
        # Its own session is its own; the operator sees both.
        status, theirs = self.as_uid(65534, "POST", "/v1/sandboxes/build/sessions",
                                     {"command": "sleep", "args": ["100"]})
        self.assertEqual(status, 201, theirs)
        listed = self.as_uid(65534, "GET", "/v1/sessions")[1]["sessions"]
        self.assertEqual([x["id"] for x in listed], [theirs["id"]])
        everything = self.d.request("GET", "/v1/sessions")[1]["sessions"]
        self.assertEqual(sorted(x["id"] for x in everything), sorted([sid, theirs["id"]]))
        status, _ = self.as_uid(65534, "DELETE", f"/v1/sessions/{theirs['id']}")
        self.assertEqual(status, 200)
        self.assertTrue(wait_gone(theirs["pid"]))
        self.assertEqual(self.d.request("POST", f"/v1/sessions/{sid}/terminate", {"grace": "0s"})[0], 200)
        self.assertEqual(self.d.request("DELETE", f"/v1/sessions/{sid}")[0], 200)

    def test_an_ended_session_nobody_closes_is_forgotten_after_its_linger(self):
        self.d.write(DOC.replace("  idle_timeout: 2s\n", "  idle_timeout: 2s\n  session_linger: 1s\n"))
        self.d.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        ended = self.start({"command": "true"})
        running = self.start({"command": "sleep", "args": ["100"]})
        status, r = self.d.request("POST", f"/v1/sessions/{ended['id']}/wait")
        self.assertEqual(status, 200)
        # Still there at first: a client may come back for its output and exit.
        self.assertEqual(self.d.request("GET", f"/v1/sessions/{ended['id']}")[0], 200)
        end = time.time() + 10
        while self.d.request("GET", f"/v1/sessions/{ended['id']}")[0] == 200 and time.time() < end:
            time.sleep(0.1)
        self.assertEqual(self.d.request("GET", f"/v1/sessions/{ended['id']}")[0], 404)
        # A running session is never swept, however old.
        self.assertEqual(self.d.request("GET", f"/v1/sessions/{running['id']}")[1]["running"], True)
        with open(self.d.audit) as f:
            self.assertIn('"event":"session_expired"', f.read())
        self.d.request("POST", f"/v1/sessions/{running['id']}/terminate", {"grace": "0s"})
        self.d.request("DELETE", f"/v1/sessions/{running['id']}")

    def test_an_idle_client_is_closed(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.d.sock)
        s.settimeout(10)
        t = time.time()
        self.assertEqual(s.recv(100), b"")  # closed by the daemon, not by our timeout
        self.assertLess(time.time() - t, 8)
        s.close()

    def test_requests_are_audited_with_the_peer(self):
        self.d.request("POST", "/v1/sandboxes/build/exec", {"command": "true"})
        with open(self.d.audit) as f:
            lines = [json.loads(x) for x in f]
        mine = [x for x in lines if x.get("event") == "request" and x.get("target") == "/v1/sandboxes/build/exec"]
        self.assertEqual(len(mine), 1)
        self.assertEqual(mine[0]["peer_pid"], os.getpid())
        self.assertEqual(mine[0]["status"], 200)
        self.assertTrue(any(x.get("event") == "finished" and x.get("command") == "true" for x in lines))

    def attach(self, sid, offset=None):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(30)
        sock.connect(self.d.sock)
        q = "" if offset is None else f"?offset={offset}"
        return websocket.create_connection(f"ws://sandboxd/v1/sessions/{sid}/attach{q}",
                                           socket=sock, timeout=30)

    @staticmethod
    def read_until(ws, text):
        got = b""
        while text.encode() not in got:
            op, data = ws.recv_data()
            if op == websocket.ABNF.OPCODE_BINARY:
                got += data
            elif op == websocket.ABNF.OPCODE_TEXT:
                return got, json.loads(data)
            else:
                return got, None
        return got, None

    def test_a_websocket_attach_carries_keys_resizes_and_the_exit(self):
        s = self.start({"command": "sh", "args": ["-c", "read x; echo got:$x; read z; stty size; "
                                                  "read y; exit $y"],
                        "tty": {"rows": 24, "cols": 80}})
        ws = self.attach(s["id"])
        ws.send_binary(b"hello\r")
        got, _ = self.read_until(ws, "got:hello")
        # Messages are taken in order: the resize is done before the next key is written.
        ws.send(json.dumps({"type": "resize", "rows": 33, "cols": 99}))
        ws.send_binary(b"go\r")
        self.read_until(ws, "33 99")
        ws.send_binary(b"5\r")
        got, end = self.read_until(ws, "\x00never")
        self.assertEqual((end["type"], end["result"]["exit_code"]), ("exit", 5))
        op, _ = ws.recv_data(control_frame=True)
        self.assertEqual(op, websocket.ABNF.OPCODE_CLOSE)
        ws.close()
        # A second client replays the whole terminal from offset 0 and gets the exit again.
        ws = self.attach(s["id"], offset=0)
        got, end = self.read_until(ws, "\x00never")
        self.assertIn(b"got:hello", got)
        self.assertEqual(end["type"], "exit")
        ws.close()

    def test_a_websocket_client_that_goes_leaves_the_session_running(self):
        s = self.start({"command": "cat", "tty": {"rows": 24, "cols": 80}})
        ws = self.attach(s["id"])
        ws.send_binary(b"one\r")
        self.read_until(ws, "one")
        ws.sock.close()  # gone without a close frame
        status, info = self.d.request("GET", f"/v1/sessions/{s['id']}")
        self.assertTrue(info["running"])
        ws = self.attach(s["id"], offset=0)
        ws.send_binary(b"two\r")
        got, _ = self.read_until(ws, "two")
        self.assertIn(b"one", got)
        ws.send(json.dumps({"type": "signal", "signal": "kill"}))
        got, end = self.read_until(ws, "\x00never")
        self.assertEqual((end["type"], end["result"]["status"]), ("exit", "signaled"))
        ws.close()
        self.assertTrue(wait_gone(s["pid"]))

    def test_a_bad_attach_or_control_message_is_classified(self):
        pipes = self.start({"command": "sleep", "args": ["100"]})
        with self.assertRaises(websocket.WebSocketBadStatusException) as e:
            self.attach(pipes["id"])
        self.assertEqual(e.exception.status_code, 409)
        with self.assertRaises(websocket.WebSocketBadStatusException) as e:
            self.attach("no-such-session")
        self.assertEqual(e.exception.status_code, 404)
        t = self.start({"command": "cat", "tty": {"rows": 24, "cols": 80}})
        with self.assertRaises(websocket.WebSocketBadStatusException) as e:
            self.attach(t["id"], offset="x")
        self.assertEqual(e.exception.status_code, 400)
        # Without the upgrade: a plain 400 with the error code.
        status, r = self.d.request("GET", f"/v1/sessions/{t['id']}/attach")
        self.assertEqual((status, r["error"]["code"]), (400, "validation"))
        ws = self.attach(t["id"])
        ws.send(json.dumps({"type": "resize", "rows": 0, "cols": 5}))
        op, data = ws.recv_data(control_frame=True)
        self.assertEqual(op, websocket.ABNF.OPCODE_CLOSE)
        self.assertEqual(int.from_bytes(data[:2], "big"), 1008)
        self.assertIn(b"validation: resize", data[2:])
        ws.close()
        status, info = self.d.request("GET", f"/v1/sessions/{t['id']}")
        self.assertTrue(info["running"])  # the session outlives a bad client
        for sid in (pipes["id"], t["id"]):
            self.d.request("POST", f"/v1/sessions/{sid}/terminate", {"grace": "0s"})
            self.d.request("DELETE", f"/v1/sessions/{sid}")

    def run_connect_tty(self, args, rows=31, cols=97):
        """sandbox-run --connect --tty on a pty of our own (pty.fork: a real terminal)."""
        import fcntl, pty, struct, termios
        pid, fd = pty.fork()
        if pid == 0:
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
                os.execv(SANDBOX_RUN, [SANDBOX_RUN, "--connect", self.d.sock, "--sandbox",
                                       "build", "--tty", "--"] + args)
            finally:
                os._exit(99)
        return pid, fd

    @staticmethod
    def read_pty_until(fd, text, timeout=30):
        return daemon_test.read_pty_until(fd, text, timeout)

    def test_sandbox_run_connect_tty_is_a_terminal_session(self):
        pid, fd = self.run_connect_tty(["sh", "-c", "read x; echo got:$x; stty size; exit 3"])
        try:
            time.sleep(0.3)
            os.write(fd, b"hi\r")
            got = self.read_pty_until(fd, "31 97")
            self.assertIn(b"got:hi", got)
            self.assertIn(b"31 97", got)  # the session's terminal has our size
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 3)
        finally:
            os.close(fd)
        self.assertEqual(self.d.request("GET", "/v1/sessions")[1]["sessions"], [])
        # SIGINT to sandbox-run ends the session's tree: 130.
        pid, fd = self.run_connect_tty(["sleep", "100"])
        try:
            end, sessions = time.time() + 10, []
            while not sessions and time.time() < end:
                sessions = self.d.request("GET", "/v1/sessions")[1]["sessions"]
                time.sleep(0.05)
            self.assertTrue(sessions)
            time.sleep(0.3)  # attached
            os.kill(pid, signal.SIGINT)
            self.read_pty_until(fd, "\x00never", timeout=5)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 130)
            self.assertTrue(wait_gone(sessions[0]["pid"]))
        finally:
            os.close(fd)
        # Not a terminal on stdin: refused before anything runs.
        p = subprocess.run([SANDBOX_RUN, "--connect", self.d.sock, "--sandbox", "build", "--tty",
                            "--", "true"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(p.returncode, 125)
        self.assertIn("--tty needs a terminal", p.stderr)

    def test_sandbox_run_connect_streams_a_stdin_file(self):
        base = [SANDBOX_RUN, "--connect", self.d.sock, "--sandbox", "build"]
        data = os.urandom(150000) + b"end\n"
        path = os.path.join(self.d.dir, "input.bin")
        with open(path, "wb") as f:
            f.write(data)
        # Posted in chunks: this daemon's body limit is 4 KiB, so the 64 KiB chunks are
        # halved until they pass; every byte arrives, in order.
        p = subprocess.run(base + ["--stdin-file", path, "--", "sha256sum"],
                           capture_output=True, timeout=60)
        import hashlib
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split()[0].decode(), hashlib.sha256(data).hexdigest())
        # Without one, stdin is empty (as a local run's /dev/null): cat ends at once.
        p = subprocess.run(base + ["--", "cat"], capture_output=True, timeout=30)
        self.assertEqual((p.returncode, p.stdout), (0, b""))
        for extra in (["--json"], ["--tty"]):
            p = subprocess.run(base + ["--stdin-file", path] + extra + ["--", "cat"],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 125, extra)
            self.assertIn("--stdin-file with --connect", p.stderr)
        p = subprocess.run(base + ["--stdin-file", os.path.join(self.d.dir, "missing"), "--", "cat"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 125)
        self.assertIn("missing", p.stderr)

    def test_sandbox_run_connect_streams_and_keeps_exit_statuses(self):
        base = [SANDBOX_RUN, "--connect", self.d.sock, "--sandbox", "build"]
        p = subprocess.run(base + ["--", "sh", "-c", "echo out; echo err >&2; exit 7"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (7, "out\n", "err\n"))
        p = subprocess.run(base + ["--timeout", "300ms", "--", "sleep", "10"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 124)
        # Output that is not UTF-8 travels as data_base64 (sandboxd encodes, sandbox-run
        # decodes): every byte value, and lengths that need 0, 1 and 2 padding characters.
        for n in (256, 257, 258):
            p = subprocess.run(base + ["--", "python3", "-c",
                                       f"import sys; sys.stdout.buffer.write(bytes(i % 256 for i in range({n})))"],
                               capture_output=True, timeout=60)
            self.assertEqual((p.returncode, p.stdout), (0, bytes(i % 256 for i in range(n))))
        p = subprocess.run(base + ["--", "no-such-command-here"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 127)
        p = subprocess.run(base + ["--json", "--", "sh", "-c", "echo j; exit 2"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(json.loads(p.stdout)["stdout"], "j\n")
        # The answer goes out through the same asynchronous sink as streamed output: a reader
        # that went away ends the run with 141, as a local run's does.
        r, w = os.pipe()
        os.close(r)
        try:
            p = subprocess.run(base + ["--json", "--", "true"], stdout=w, stderr=subprocess.PIPE,
                               timeout=60)
        finally:
            os.close(w)
        self.assertEqual(p.returncode, 141, p.stderr)
        p = subprocess.run([SANDBOX_RUN, "--connect", self.d.sock, "--sandbox", "nope", "--", "true"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 125)
        p = subprocess.Popen(base + ["--", "sleep", "100"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        end = time.time() + 10
        sessions = []
        while not sessions and time.time() < end:
            sessions = self.d.request("GET", "/v1/sessions")[1]["sessions"]
            time.sleep(0.05)
        self.assertTrue(sessions)
        p.send_signal(signal.SIGINT)
        self.assertEqual(p.wait(30), 130)
        p.stdout.close()
        p.stderr.close()
        self.assertTrue(wait_gone(sessions[0]["pid"]))


    def test_sandbox_run_connect_output_never_holds_its_loop(self):
        """The streamed output goes out through an asynchronous sink: a reader that goes away
        ends the run (141, the session terminated), and a reader that stops reading does not
        keep a signal from ending it (130)."""
        base = [SANDBOX_RUN, "--connect", self.d.sock, "--sandbox", "build", "--", "yes"]

        def session_pid():
            end = time.time() + 10
            while time.time() < end:
                sessions = self.d.request("GET", "/v1/sessions")[1]["sessions"]
                if sessions:
                    return sessions[0]["pid"]
                time.sleep(0.05)
            self.fail("no session")

        for reader in ("gone", "stalled"):
            p = subprocess.Popen(base, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                self.assertTrue(p.stdout.read1(4096), reader)
                pid = session_pid()
                if reader == "gone":
                    p.stdout.close()
                    self.assertEqual(p.wait(30), 141)
                    self.assertIn(b"the reader of the output went away", p.stderr.read())
                else:
                    time.sleep(1)  # the pipe fills: a write waits for room
                    p.send_signal(signal.SIGINT)
                    self.assertEqual(p.wait(30), 130)
                self.assertTrue(wait_gone(pid), reader)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                for f in (p.stdout, p.stderr):
                    f.close()


class FakeDaemon:
    """A daemon that answers sandbox-run --connect with output it chooses: one HTTP/1.1
    server on a unix socket in a temporary directory, answering in order of the calls."""

    def __init__(self, output_bodies):
        self.dir = tempfile.mkdtemp(prefix="sbx-fake-")
        self.sock = os.path.join(self.dir, "d.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.sock)
        self.listener.listen(8)
        self.outputs = list(output_bodies)
        self.calls = []
        import threading
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def answer(self, method, target):
        self.calls.append(f"{method} {target}")
        if target.endswith("/sessions") and method == "POST":
            return 201, {"id": "s1"}
        if "/output" in target:
            return 200, self.outputs.pop(0) if self.outputs else {"chunks": [], "next": 0, "eof": True}
        if target.endswith("/wait"):
            return 200, {"exit_code": 0, "status": "exited", "out": {"data": ""}, "err": {"data": ""}}
        return 200, {}

    def serve(self):
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            with c, c.makefile("rb") as r:
                while True:
                    line = r.readline()
                    if not line:
                        break
                    method, target, _ = line.decode().split(" ", 2)
                    length = 0
                    while (h := r.readline()) not in (b"\r\n", b"\n", b""):
                        name, _, value = h.decode().partition(":")
                        if name.strip().lower() == "content-length":
                            length = int(value)
                    r.read(length)
                    status, body = self.answer(method, target)
                    data = json.dumps(body).encode()
                    c.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\n\r\n" % (status, len(data)) + data)

    def close(self):
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (close does not)
        self.listener.close()
        self.thread.join(5)
        assert not self.thread.is_alive()
        shutil.rmtree(self.dir, ignore_errors=True)


class ConnectAgainstAFakeDaemon(unittest.TestCase):
    """What sandbox-run --connect does with a daemon that answers wrongly."""

    def run_against(self, data_base64):
        """sandbox-run --connect against a daemon whose one output chunk is `data_base64`."""
        fake = FakeDaemon([{"chunks": [{"stream": "stdout", "data_base64": data_base64}],
                            "next": 5, "eof": False}])
        try:
            return subprocess.run([SANDBOX_RUN, "--connect", fake.sock, "--sandbox", "build",
                                   "--", "true"], capture_output=True, timeout=60)
        finally:
            fake.close()

    def test_output_that_is_not_base64_is_refused_not_half_decoded(self):
        for bad in ["aGVsbG8=!!", "aGVsbG8", "aGVs bG8=", "aGVsbG8===", "aGVsbA=A", "aGVs=bG8"]:
            p = self.run_against(bad)
            self.assertEqual(p.returncode, 125, (bad, p.stdout, p.stderr))
            self.assertEqual(p.stdout, b"", bad)
            self.assertIn(b"base64", p.stderr, bad)
        # Good output: its bytes, and the exit.
        p = self.run_against("aGVsbG8=")
        self.assertEqual((p.returncode, p.stdout), (0, b"hello"), p.stderr)


if __name__ == "__main__":
    SANDBOXD, SANDBOX_RUN = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1], verbosity=2)
