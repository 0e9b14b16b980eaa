#!/usr/bin/env python3
"""sandboxd end to end: a real daemon on a unix socket in a temp dir, driven by curl
--unix-socket and by Python's http.client over AF_UNIX. Usage: daemon_test.py SANDBOXD"""
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SANDBOXD = None

DOC = """version: v1
daemon:
  audit_file: @DIR@/audit.jsonl
  max_body_bytes: 4KiB
  idle_timeout: 1s
@ALLOW@
sandboxes:
  box:
    backend: local
    root: @DIR@/ws
    defaults:
      timeout: 30s
      env: {allow: [PATH], inject: {CI: "yes"}}
  quick:
    backend: local
    root: @DIR@/ws
    defaults: {timeout: 1s}
  guarded:
    backend: local
    root: @DIR@/ws
    approval: {sensitive_commands: ["rm*"], deadline: "2s"}
"""


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("sandboxd", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def end_process(proc):
    """SIGTERM, then SIGKILL after 30 s; reaped either way."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_gone(pid, seconds=10.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)


def read_pty_until(fd, text, timeout=30):
    """What a pseudo-terminal's master `fd` gives until `text` shows, it ends or time runs out."""
    import select
    got, end = b"", time.time() + timeout
    while text.encode() not in got and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
    return got


def children_of(pid):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    if int(f.read().rsplit(") ", 1)[1].split()[1]) == pid:
                        out.append(int(p))
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                pass
    return out


class Daemon:
    def __init__(self, allow=""):
        self.dir = tempfile.mkdtemp(prefix="sandboxd-daemon-test-")
        self.root = os.path.join(self.dir, "ws")
        os.mkdir(self.root)
        self.sock = os.path.join(self.dir, "d.sock")
        self.doc = os.path.join(self.dir, "d.yaml")
        self.write(DOC, allow)
        self.logf = open(os.path.join(self.dir, "log"), "w+")
        self.proc = None
        self.start()

    def start(self):
        env = dict(os.environ, SANDBOXD_TEST_SECRET="hidden")
        self.proc = subprocess.Popen([SANDBOXD, "--config", self.doc, "--listen", self.sock],
                                     stdin=subprocess.DEVNULL, stdout=self.logf,
                                     stderr=self.logf, env=env)
        end = time.monotonic() + 15
        while True:
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("sandboxd did not start: " + self.log())
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.sock)
                return
            except OSError:
                time.sleep(0.02)

    def write(self, text, allow=""):
        text = text.replace("@DIR@", self.dir).replace("@ALLOW@", allow)
        with open(self.doc + ".new", "w") as f:
            f.write(text)
        os.replace(self.doc + ".new", self.doc)

    def reload(self, test):
        """SIGHUP, then wait (up to 10 s) for the log to say the document was reloaded."""
        before = self.log().count("reloaded")
        self.proc.send_signal(signal.SIGHUP)
        end = time.monotonic() + 10
        while self.log().count("reloaded") == before and time.monotonic() < end:
            time.sleep(0.02)
        test.assertGreater(self.log().count("reloaded"), before, self.log())

    def log(self):
        self.logf.flush()
        self.logf.seek(0)
        return self.logf.read()

    def audit(self):
        try:
            with open(os.path.join(self.dir, "audit.jsonl")) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def conn(self, timeout=60):
        return UnixHTTPConnection(self.sock, timeout)

    def request(self, method, path, body=None, conn=None, timeout=60):
        c = conn or self.conn(timeout)
        data = body if body is None or isinstance(body, (bytes, str)) else json.dumps(body)
        c.request(method, path, body=data)
        r = c.getresponse()
        raw = r.read()
        if conn is None:
            c.close()
        return r.status, json.loads(raw)

    def curl(self, method, path, data=None):
        args = ["curl", "-sS", "--max-time", "60", "--unix-socket", self.sock, "-X", method,
                "-w", "\n%{http_code}", "http://sandboxd" + path]
        if data is not None:
            args += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
        p = subprocess.run(args, input=(data if isinstance(data, str) else json.dumps(data))
                           if data is not None else None, capture_output=True, text=True,
                           timeout=90, stdin=None if data is not None else subprocess.DEVNULL)
        body, _, code = p.stdout.rpartition("\n")
        return int(code), (json.loads(body) if body.strip() else None)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            end_process(self.proc)
        self.logf.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class DaemonTest(unittest.TestCase):
    def setUp(self):
        self.d = Daemon()
        self.pids = []

    def tearDown(self):
        pid = self.d.proc.pid
        self.d.stop()
        for p in self.pids:  # the trees of the sessions the test started
            self.assertTrue(wait_gone(p, 10), f"session pid {p} outlived the daemon")
        self.assertFalse(os.path.exists(self.d.dir))
        self.assertNotIn(pid, children_of(os.getpid()))

    # -- helpers -------------------------------------------------------------------------
    def session(self, body, sandbox="box", conn=None):
        status, s = self.d.request("POST", f"/v1/sandboxes/{sandbox}/sessions", body, conn)
        self.assertEqual(status, 201, s)
        self.assertTrue(s["id"])
        self.assertGreater(s["pid"], 0)
        self.pids.append(s["pid"])
        return s

    def read_all(self, sid, offset=0, conn=None, max_=None):
        """Everything from offset to eof (the session must end)."""
        data, end = b"", time.monotonic() + 30
        while time.monotonic() < end:
            q = f"/v1/sessions/{sid}/output?offset={offset}&wait=2000"
            if max_:
                q += f"&max={max_}"
            status, out = self.d.request("GET", q, conn=conn)
            self.assertEqual(status, 200, out)
            at = offset
            for c in out["chunks"]:
                self.assertEqual(c["offset"], at)  # contiguous
                b = c["data"].encode() if "data" in c else base64.b64decode(c["data_base64"])
                data, at = data + b, at + len(b)
            self.assertEqual(out["next"], at)
            offset = out["next"]
            if out["eof"]:
                return data, offset
        self.fail("no eof")

    # -- listing, exec, errors ---------------------------------------------------------------
    def test_list_sandboxes_with_curl(self):
        code, body = self.d.curl("GET", "/v1/sandboxes")
        self.assertEqual(code, 200)
        boxes = {b["name"]: b for b in body["sandboxes"]}
        self.assertEqual(set(boxes), {"box", "quick", "guarded"})
        self.assertEqual(boxes["box"]["backend"], "local")
        self.assertEqual(boxes["box"]["root"], self.d.root)
        self.assertTrue(boxes["box"]["enforcement"]["env_allow_list"])

    def test_exec_success_with_defaults_env_stdin_work_dir(self):
        os.mkdir(os.path.join(self.d.root, "sub"))
        status, r = self.d.request("POST", "/v1/sandboxes/box/exec", {
            "command": "sh", "args": ["-c", "cat; echo; pwd; env"], "stdin": "from-stdin",
            "work_dir": "sub"})
        self.assertEqual(status, 200, r)
        self.assertEqual((r["exit_code"], r["status"], r["backend"]), (0, "exited", "local"))
        lines = r["stdout"].splitlines()
        self.assertEqual(lines[0], "from-stdin")
        self.assertEqual(lines[1], os.path.join(self.d.root, "sub"))
        self.assertIn("CI=yes", lines)  # env.inject
        self.assertTrue(any(x.startswith("PATH=") for x in lines))  # env.allow
        self.assertFalse(any("SANDBOXD_TEST_SECRET" in x for x in lines))  # not allowed
        self.assertNotIn("error", r)

    def test_exec_nonzero_exit_is_200_with_curl(self):
        code, r = self.d.curl("POST", "/v1/sandboxes/box/exec",
                              {"command": "sh", "args": ["-c", "echo out; echo err >&2; exit 3"]})
        self.assertEqual(code, 200, r)
        self.assertEqual((r["exit_code"], r["status"]), (3, "exited"))
        self.assertEqual((r["stdout"], r["stderr"]), ("out\n", "err\n"))

    def test_exec_timeout_from_call_and_from_defaults(self):
        t0 = time.monotonic()
        status, r = self.d.request("POST", "/v1/sandboxes/box/exec",
                                   {"command": "sleep", "args": ["10"], "timeout": "300ms"})
        self.assertEqual(status, 200, r)
        self.assertEqual(r["status"], "timed_out")
        self.assertEqual(r["error"]["code"], "timeout")
        self.assertLess(time.monotonic() - t0, 5)
        t0 = time.monotonic()  # quick's defaults: timeout 1s
        code, r = self.d.curl("POST", "/v1/sandboxes/quick/exec", {"command": "sleep",
                                                                   "args": ["10"]})
        self.assertEqual((code, r["status"]), (200, "timed_out"), r)
        self.assertGreater(time.monotonic() - t0, 0.9)
        self.assertLess(time.monotonic() - t0, 6)

    def test_errors_validation_not_found_too_large_unknown_endpoint(self):
        status, r = self.d.request("POST", "/v1/sandboxes/box/exec",
                                   {"command": "sleep", "timeout": 5})
        self.assertEqual(status, 400, r)
        self.assertEqual(r["error"]["code"], "validation")
        self.assertIn("timeout", r["error"]["message"])
        status, r = self.d.request("POST", "/v1/sandboxes/box/exec", "not json")
        self.assertEqual((status, r["error"]["code"]), (400, "validation"))
        code, r = self.d.curl("POST", "/v1/sandboxes/nope/exec", {"command": "true"})
        self.assertEqual((code, r["error"]["code"]), (404, "not_found"))
        self.assertIn("nope", r["error"]["message"])
        code, r = self.d.curl("POST", "/v1/sandboxes/box/exec",
                              {"command": "echo", "args": ["x" * 8192]})  # over 4KiB
        self.assertEqual(code, 413, r)
        for size in (8192, 65536, 300000):  # http.client sends head and body apart: the 413
            status, r = self.d.request("POST", "/v1/sandboxes/box/exec",  # must still arrive
                                       {"command": "echo", "args": ["y" * size]})
            self.assertEqual(status, 413, r)
        for method, path in [("GET", "/v1/nothing"), ("GET", "/"), ("PUT", "/v1/sandboxes"),
                             ("GET", "/v1/sessions/none"), ("DELETE", "/v1/sessions/none"),
                             ("GET", "/v1/sessions/none/output")]:
            code, r = self.d.curl(method, path)
            self.assertEqual((code, r["error"]["code"]), (404, "not_found"), (method, path))
        self.assertEqual(self.d.curl("POST", "/v1/approvals/999", {"decision": "allow"})[0], 404)
        self.assertEqual(self.d.curl("POST", "/v1/approvals/1", {"decision": "maybe"})[0], 400)
        self.assertIsNone(self.d.proc.poll())
        statuses = [a.get("status") for a in self.d.audit() if a.get("event") == "request"]
        self.assertIn(400, statuses)
        self.assertIn(404, statuses)

    # -- sessions ------------------------------------------------------------------------------
    def test_cat_session_input_long_poll_close_wait_delete(self):
        c = self.d.conn()  # one keep-alive connection for the whole conversation
        s = self.session({"command": "cat"}, conn=c)
        sid = s["id"]
        self.assertTrue(s["running"])
        self.assertEqual((s["sandbox"], s["argv"], s["tty"]), ("box", ["cat"], False))
        t0 = time.monotonic()  # nothing yet: the long-poll ends empty after its wait
        status, out = self.d.request("GET", f"/v1/sessions/{sid}/output?offset=0&wait=300", conn=c)
        self.assertEqual((status, out["chunks"], out["next"], out["eof"]), (200, [], 0, False))
        self.assertGreater(time.monotonic() - t0, 0.25)
        got = {}

        def poll():  # a second client long-polls while the input arrives
            got["t"] = time.monotonic()
            got["r"] = self.d.request("GET", f"/v1/sessions/{sid}/output?offset=0&wait=20000")
            got["t"] = time.monotonic() - got["t"]

        th = threading.Thread(target=poll)
        th.start()
        time.sleep(0.3)
        status, info = self.d.request("POST", f"/v1/sessions/{sid}/input", b"hello\n", conn=c)
        self.assertEqual((status, info["id"]), (200, sid))
        th.join(30)
        self.assertFalse(th.is_alive())
        status, out = got["r"]
        self.assertEqual(status, 200)
        self.assertEqual("".join(x["data"] for x in out["chunks"]), "hello\n")
        self.assertEqual(out["chunks"][0]["stream"], "stdout")
        self.assertEqual(out["next"], 6)
        self.assertLess(got["t"], 10)
        status, lst = self.d.request("GET", "/v1/sessions", conn=c)
        self.assertIn(sid, [x["id"] for x in lst["sessions"]])
        status, one = self.d.request("GET", f"/v1/sessions/{sid}", conn=c)
        self.assertEqual((status, one["running"], one["pid"]), (200, True, s["pid"]))
        self.assertEqual(self.d.request("POST", f"/v1/sessions/{sid}/close-input", conn=c)[0], 200)
        status, r = self.d.request("POST", f"/v1/sessions/{sid}/wait", conn=c)
        self.assertEqual((status, r["status"], r["exit_code"]), (200, "exited", 0), r)
        status, one = self.d.request("GET", f"/v1/sessions/{sid}", conn=c)
        self.assertFalse(one["running"])
        self.assertEqual((one["exit"]["status"], one["exit"]["exit_code"]), ("exited", 0))
        status, out = self.d.request("GET", f"/v1/sessions/{sid}/output?offset=6", conn=c)
        self.assertEqual((status, out["chunks"], out["eof"]), (200, [], True))
        status, r = self.d.request("DELETE", f"/v1/sessions/{sid}", conn=c)
        self.assertEqual((status, r), (200, {"id": sid, "closed": True}))
        self.assertEqual(self.d.request("GET", f"/v1/sessions/{sid}", conn=c)[0], 404)
        self.assertEqual(self.d.request("DELETE", f"/v1/sessions/{sid}", conn=c)[0], 404)
        c.close()

    def test_signal_resize_terminate(self):
        s = self.session({"command": "sleep", "args": ["100"]})
        code, r = self.d.curl("POST", f"/v1/sessions/{s['id']}/signal", {"signal": "bogus"})
        self.assertEqual((code, r["error"]["code"]), (400, "validation"))
        code, r = self.d.curl("POST", f"/v1/sessions/{s['id']}/signal", {"signal": "interrupt"})
        self.assertEqual(code, 200, r)
        code, r = self.d.curl("POST", f"/v1/sessions/{s['id']}/wait")
        self.assertEqual((code, r["status"], r["signal"]), (200, "signaled", 2), r)
        self.assertTrue(wait_gone(s["pid"], 5))
        s = self.session({"command": "sleep", "args": ["100"]})
        t0 = time.monotonic()
        code, r = self.d.curl("POST", f"/v1/sessions/{s['id']}/terminate", {"grace": "1s"})
        self.assertEqual((code, r["status"], r["signal"]), (200, "terminated", 15), r)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertTrue(wait_gone(s["pid"], 5))
        code, r = self.d.curl("POST", f"/v1/sessions/{s['id']}/terminate", {"grace": 1})
        self.assertEqual(code, 400, r)
        # a terminal session: resize, and the program sees the new size
        s = self.session({"command": "sh", "args": ["-c", "read x; stty size"], "tty": True})
        self.assertTrue(s["tty"])
        code, r = self.d.curl("POST", f"/v1/sessions/{s['id']}/resize", {"rows": 0, "cols": 5})
        self.assertEqual(code, 400, r)
        code, r = self.d.curl("POST", f"/v1/sessions/{s['id']}/resize", {"rows": 33, "cols": 77})
        self.assertEqual(code, 200, r)
        self.assertEqual(self.d.request("POST", f"/v1/sessions/{s['id']}/input", b"go\n")[0], 200)
        data, _ = self.read_all(s["id"])
        self.assertIn(b"33 77", data)

    def test_reconnect_and_replay(self):
        s = self.session({"command": "seq", "args": ["1", "3000"]})
        sid = s["id"]
        expected = "".join(f"{i}\n" for i in range(1, 3001)).encode()
        self.assertEqual(self.d.request("POST", f"/v1/sessions/{sid}/wait")[0], 200)
        c1 = self.d.conn()
        status, out = self.d.request("GET", f"/v1/sessions/{sid}/output?offset=0&max=1000", conn=c1)
        self.assertEqual(status, 200, out)
        part = "".join(x["data"] for x in out["chunks"]).encode()
        saved = out["next"]
        self.assertEqual(saved, len(part))
        self.assertTrue(0 < saved <= 1000)
        self.assertFalse(out["eof"])
        c1.close()  # the client goes away; the session stays
        c2 = self.d.conn()
        full, end = self.read_all(sid, 0, conn=c2)
        rest, end2 = self.read_all(sid, saved, conn=c2)
        c2.close()
        self.assertEqual(full, expected)
        self.assertEqual(full[:saved], part)
        self.assertEqual(rest, full[saved:])
        self.assertEqual((end, end2), (len(expected), len(expected)))
        code, out = self.d.curl("GET", f"/v1/sessions/{sid}/output?offset=0&max=1000")
        self.assertEqual((code, "".join(x["data"] for x in out["chunks"]).encode()), (200, part))

    def test_sequence_gap_past_the_output_cap(self):
        s = self.session({"command": "head", "args": ["-c", "1000000", "/dev/zero"],
                          "resources": {"max_output_bytes": "64KiB"}})
        sid = s["id"]
        code, r = self.d.curl("POST", f"/v1/sessions/{sid}/wait")
        self.assertEqual((code, r["exit_code"]), (200, 0), r)
        code, r = self.d.curl("GET", f"/v1/sessions/{sid}/output?offset=0")
        self.assertEqual(code, 409, r)
        self.assertEqual(r["error"]["code"], "sequence_gap")
        resume = r["error"]["resume_at"]
        self.assertGreater(resume, 0)
        self.assertLessEqual(resume, 1000000)
        data, end = self.read_all(sid, resume)
        self.assertEqual(end, 1000000)
        self.assertEqual(len(data), 1000000 - resume)
        self.assertLessEqual(len(data), 64 * 1024)
        self.assertEqual(data.count(b"\0"), len(data))

    # -- approvals -------------------------------------------------------------------------------
    def approval_call(self, name, answer):
        victim = os.path.join(self.d.root, name)
        open(victim, "w").close()
        res = {}

        def call():
            t0 = time.monotonic()
            res["r"] = self.d.request("POST", "/v1/sandboxes/guarded/exec",
                                      {"command": "rm", "args": ["-f", name]})
            res["t"] = time.monotonic() - t0

        th = threading.Thread(target=call)
        th.start()
        pending, end = [], time.monotonic() + 10
        while not pending and time.monotonic() < end:
            code, body = self.d.curl("GET", "/v1/approvals")
            self.assertEqual(code, 200)
            pending = body["approvals"]
            time.sleep(0.05)
        self.assertEqual(len(pending), 1, pending)
        self.assertEqual((pending[0]["command"], pending[0]["args"]), ("rm", ["-f", name]))
        self.assertTrue(os.path.exists(victim))  # nothing runs before an answer
        if answer:
            code, r = self.d.curl("POST", f"/v1/approvals/{pending[0]['id']}",
                                  {"decision": answer})
            self.assertEqual((code, r["decision"]), (200, answer), r)
        th.join(30)
        self.assertFalse(th.is_alive())
        return res["r"][0], res["r"][1], res["t"], os.path.exists(victim)

    def test_approvals_allow_deny_and_deadline(self):
        status, r = self.d.request("POST", "/v1/sandboxes/guarded/exec", {"command": "true"})
        self.assertEqual((status, r["exit_code"]), (200, 0), r)  # not sensitive: no question
        status, r, _, exists = self.approval_call("a", "allow")
        self.assertEqual((status, r["exit_code"], exists), (200, 0, False), r)
        status, r, _, exists = self.approval_call("b", "deny")
        self.assertEqual((status, r["error"]["code"], exists), (403, "policy_denied", True), r)
        status, r, took, exists = self.approval_call("c", None)
        self.assertEqual((status, r["error"]["code"], exists), (403, "policy_denied", True), r)
        self.assertGreater(took, 1.5)
        self.assertLess(took, 10)
        self.assertEqual(self.d.curl("GET", "/v1/approvals")[1], {"approvals": []})

    # -- reload, signals --------------------------------------------------------------------------
    def names(self):
        code, body = self.d.curl("GET", "/v1/sandboxes")
        self.assertEqual(code, 200)
        return {b["name"] for b in body["sandboxes"]}

    def test_sighup_reload_good_and_bad(self):
        self.assertNotIn("extra", self.names())
        self.d.write(DOC + "  extra:\n    backend: local\n    root: @DIR@/ws\n")
        self.d.proc.send_signal(signal.SIGHUP)
        end = time.monotonic() + 10
        while "extra" not in self.names() and time.monotonic() < end:
            time.sleep(0.05)
        self.assertEqual(self.names(), {"box", "quick", "guarded", "extra"})
        self.d.write("version: v1\nsandboxes: {broken: {backend: local}}\n")
        self.d.proc.send_signal(signal.SIGHUP)
        end = time.monotonic() + 10
        while "reload failed" not in self.d.log() and time.monotonic() < end:
            time.sleep(0.05)
        self.assertIn("reload failed", self.d.log())
        self.assertIsNone(self.d.proc.poll())
        self.assertEqual(self.names(), {"box", "quick", "guarded", "extra"})

    def test_sigterm_ends_sessions_and_exits_0(self):
        s = self.session({"command": "sleep", "args": ["100"]})
        self.assertTrue(alive(s["pid"]))
        self.d.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.d.proc.wait(30), 0, self.d.log())
        self.assertTrue(wait_gone(s["pid"], 5))
        self.assertFalse(os.path.exists(self.d.sock))

    def test_sigkill_daemon_kills_session_trees(self):
        s = self.session({"command": "sleep", "args": ["100"]})
        helpers = children_of(self.d.proc.pid)
        self.assertTrue(alive(s["pid"]))
        self.d.proc.kill()
        self.d.proc.wait(10)
        self.assertTrue(wait_gone(s["pid"], 10), "the session outlived a SIGKILLed daemon")
        for h in helpers:
            self.assertTrue(wait_gone(h, 10), f"helper {h} outlived the daemon")
        self.assertTrue(os.path.exists(self.d.sock))  # stale: a new daemon takes it over
        self.d.start()
        self.assertEqual(self.names(), {"box", "quick", "guarded"})

    # -- peers, slow clients ----------------------------------------------------------------------
    def as_nobody(self):
        """GET /v1/sandboxes as uid/gid 65534 from a forked child: (status, body)."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                c = UnixHTTPConnection(self.d.sock, 10)
                c.request("GET", "/v1/sandboxes")
                resp = c.getresponse()
                out = json.dumps([resp.status, json.loads(resp.read())])
            except BaseException as e:  # noqa: B902 -- reported to the parent
                out = json.dumps([-1, repr(e)])
            os.write(w, out.encode())
            os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            text = f.read()
        _, st = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(st), 0)
        return json.loads(text)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to become another uid")
    def test_peer_uid_not_allowed_then_allowed(self):
        self.assertEqual(os.stat(self.d.sock).st_mode & 0o777, 0o600)
        os.chmod(self.d.dir, 0o755)
        os.chmod(self.d.sock, 0o666)
        for _ in range(5):  # every refused client sees its 403 (no EPIPE race)
            status, body = self.as_nobody()
            self.assertEqual(status, 403, body)
            self.assertEqual(body["error"]["code"], "forbidden")
        refused = [a for a in self.d.audit() if a.get("event") == "refused"]
        self.assertEqual([a["peer_uid"] for a in refused], [65534] * 5)
        self.d.write(DOC, "  allow_uids: [65534]")
        self.d.proc.send_signal(signal.SIGHUP)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            status, body = self.as_nobody()
            if status == 200:
                break
            time.sleep(0.1)
        self.assertEqual(status, 200, body)
        self.assertIn("box", {b["name"] for b in body["sandboxes"]})
        self.assertTrue(any(a.get("event") == "request" and a.get("peer_uid") == 65534
                            for a in self.d.audit()))

    def test_idle_connection_is_closed_after_idle_timeout(self):
        for first in (b"", b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n"):  # silent, then slow
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(15)
                s.connect(self.d.sock)
                s.sendall(first)
                t0 = time.monotonic()
                got = s.recv(4096)
                took = time.monotonic() - t0
                self.assertEqual(got, b"")  # closed, no answer
                self.assertGreater(took, 0.7)
                self.assertLess(took, 5)
        self.assertIsNone(self.d.proc.poll())
        self.assertIn("box", self.names())  # the daemon goes on


def as_uid(uid, call):
    """Runs call() in a forked child as `uid` (and the same gid); returns what it returned
    (anything JSON can carry)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgid(uid)
            os.setuid(uid)
            os.write(w, json.dumps(call()).encode())
        finally:
            os._exit(0)
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(out)


def run_suite():
    """unittest.main on this process's arguments; exits 0 only when every test passed and no
    child of ours was left behind."""
    prog = unittest.main(module="__main__", exit=False, verbosity=2)
    try:  # no child of ours left behind
        left = os.waitpid(-1, os.WNOHANG)
        print("a child was left:", left, file=sys.stderr)
        ok = False
    except ChildProcessError:
        ok = True
    sys.exit(0 if ok and prog.result.wasSuccessful() else 1)


def main():
    global SANDBOXD
    if len(sys.argv) < 2:
        sys.exit("usage: daemon_test.py SANDBOXD [unittest args]")
    SANDBOXD = os.path.abspath(sys.argv.pop(1))
    run_suite()


if __name__ == "__main__":
    main()
