#!/usr/bin/env python3
"""sandboxd's instances (issue 36) driven by curl, http.client and sandbox-run --connect
--instance: open, exec in, close; what commands of one bwrap instance share and what they do
not; bounds per uid and for the daemon; idle expiry; a client that goes; reload and SIGTERM.
Usage: instances_test.py SANDBOXD SANDBOX_RUN [unittest args]"""
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_test  # noqa: E402  (the Daemon fixture, clients and process helpers)
import hostile_test  # noqa: E402  (its Fixture: pids checked gone, rewrite, reload, bwrap box)
from daemon_test import alive, as_uid, children_of, wait_gone  # noqa: E402

SANDBOX_RUN = None
HAVE_BWRAP = shutil.which("bwrap") is not None

BOUNDS = ("  instance_idle: 10m\n  max_instances_per_uid: 2\n  max_instances: 3\n"
          "  allow_uids: [65534]")


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def instance_trees(daemon_pid):
    """The processes of the daemon's bwrap instances: each one's bwrap and the status init
    under it, with everything below the init."""
    out = []
    for pid in descendants(daemon_pid):
        if comm(pid) == "sandbox-init":
            with open(f"/proc/{pid}/stat") as f:
                out.append(int(f.read().rsplit(") ", 1)[1].split()[1]))  # its bwrap
            out += [pid] + descendants(pid)
    return out


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        for c in children_of(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


class InstancesTest(hostile_test.Fixture):
    allow = BOUNDS

    def open(self, sandbox, body=None, expect=201):
        status, r = self.d.request("POST", f"/v1/sandboxes/{sandbox}/instances", body)
        self.assertEqual(status, expect, r)
        return r

    def run_in(self, sandbox, iid, body, conn=None):
        return self.d.request("POST", f"/v1/sandboxes/{sandbox}/instances/{iid}/exec", body,
                              conn=conn)

    def events(self, name):
        return [a for a in self.d.audit() if a.get("event") == name]

    def add_shared_box(self):
        """A local sandbox other uids may use (it runs their commands as the daemon's)."""
        os.chmod(self.d.dir, 0o755)
        os.chmod(self.d.sock, 0o666)
        self.rewrite("sandboxes:\n", "sandboxes:\n  shared:\n    backend: local\n"
                     f"    run_as: daemon\n    root: {self.d.root}\n")
        self.reload()

    def test_curl_opens_runs_in_lists_and_closes_an_instance(self):
        code, i = self.d.curl("POST", "/v1/sandboxes/box/instances", {})
        self.assertEqual(code, 201, i)
        self.assertEqual((i["sandbox"], i["backend"], i["open"], i["owner_uid"]),
                         ("box", "local", True, os.geteuid()), i)
        path = f"/v1/sandboxes/box/instances/{i['id']}"
        code, r = self.d.curl("POST", path + "/exec",
                              {"command": "sh", "args": ["-c", "echo $CI; pwd; exit 3"]})
        self.assertEqual((code, r["status"], r["exit_code"]), (200, "exited", 3), r)
        self.assertEqual(r["stdout"], "yes\n" + os.path.realpath(self.d.root) + "\n")
        code, listed = self.d.curl("GET", "/v1/sandboxes/box/instances")
        self.assertEqual([x["id"] for x in listed["instances"]], [i["id"]])
        self.assertEqual(self.d.curl("GET", "/v1/sandboxes/quick/instances")[1]["instances"], [])
        code, r = self.d.curl("DELETE", path)
        self.assertEqual((code, r), (200, {"id": i["id"], "closed": True}))
        code, r = self.d.curl("POST", path + "/exec", {"command": "true"})
        self.assertEqual((code, r["error"]["code"]), (404, "not_found"), r)
        self.assertEqual(self.d.curl("DELETE", path)[0], 404)
        # The library's trail: opened, the command's records naming the instance, closed.
        self.assertEqual([a["instance"] for a in self.events("instance_opened")], [i["id"]])
        self.assertEqual([a["instance"] for a in self.events("instance_closed")], [i["id"]])
        self.assertIn(i["id"], [a.get("instance") for a in self.events("finished")])
        owner = self.events("instance_owner")
        self.assertEqual((owner[0]["instance"], owner[0]["peer_uid"]), (i["id"], os.geteuid()))

    @unittest.skipUnless(HAVE_BWRAP, "bubblewrap is not installed")
    def test_bwrap_commands_share_tmp_and_nothing_else(self):
        self.add_bwrap_box(self.d.root)
        i = self.open("walled")
        tree = instance_trees(self.d.proc.pid)
        self.assertGreaterEqual(len(tree), 2, "the instance's bwrap and init run below the daemon")
        status, r = self.run_in("walled", i["id"], {
            "command": "sh", "env": {"inject": {"LEAK": "one"}},
            "args": ["-c", "echo kept > /tmp/note; exec 7>/tmp/held; sleep 60 & echo $!"]})
        self.assertEqual((status, r["status"], r["exit_code"]), (200, "exited", 0), r)
        sleeper = r["stdout"].strip()
        status, r = self.run_in("walled", i["id"], {"command": "sh", "args": ["-c", (
            f"cat /tmp/note; kill -0 {sleeper} 2>/dev/null && echo alive || echo gone; "
            "echo ${LEAK:-none}; ls /proc/self/fd | tr '\\n' ' '")]})
        self.assertEqual((status, r["exit_code"]), (200, 0), r)
        self.assertEqual(r["stdout"], "kept\ngone\nnone\n0 1 2 3 ", r)
        self.assertEqual(self.d.request("DELETE", f"/v1/sandboxes/walled/instances/{i['id']}")[0],
                         200)
        for pid in tree:
            self.assertTrue(wait_gone(pid, 10), f"pid {pid} of the instance outlived its close")

    def read_session(self, sid, needle=None, seconds=30):
        """The session's output from the start: up to its end, or until `needle` shows."""
        data, offset, end = b"", 0, time.monotonic() + seconds
        while time.monotonic() < end:
            status, out = self.d.request(
                "GET", f"/v1/sessions/{sid}/output?offset={offset}&wait=1000")
            self.assertEqual(status, 200, out)
            for c in out["chunks"]:
                data += c["data"].encode() if "data" in c else base64.b64decode(c["data_base64"])
            offset = out["next"]
            if out["eof"] or (needle and needle in data):
                return data
        self.fail(f"no end of session {sid} (got {data!r})")

    @unittest.skipUnless(HAVE_BWRAP, "bubblewrap is not installed")
    def test_sessions_inside_a_bwrap_instance_with_curl(self):
        self.add_bwrap_box(self.d.root)
        i = self.open("walled")
        base = f"/v1/sandboxes/walled/instances/{i['id']}"
        tree = instance_trees(self.d.proc.pid)
        status, r = self.run_in("walled", i["id"], {"command": "sh",
                                                    "args": ["-c", "echo kept > /tmp/note"]})
        self.assertEqual((status, r["exit_code"]), (200, 0), r)
        # On pipes: the instance's /tmp and pid namespace, input, wait, output.
        code, s = self.d.curl("POST", base + "/sessions", {"command": "sh", "args": [
            "-c", "cat /tmp/note; cat /proc/1/comm; read x; echo got $x"]})
        self.assertEqual((code, s["instance"], s["sandbox"], s["tty"]),
                         (201, i["id"], "walled", False), s)
        self.assertEqual(self.d.request("POST", f"/v1/sessions/{s['id']}/input", b"hi\n")[0], 200)
        code, r = self.d.curl("POST", f"/v1/sessions/{s['id']}/wait")
        self.assertEqual((code, r["status"], r["exit_code"]), (200, "exited", 0), r)
        self.assertEqual(self.read_session(s["id"]), b"kept\nsandbox-init\ngot hi\n")
        code, listed = self.d.curl("GET", "/v1/sessions")
        self.assertIn((s["id"], i["id"]), [(x["id"], x.get("instance")) for x in listed["sessions"]])
        self.assertEqual(self.d.curl("DELETE", f"/v1/sessions/{s['id']}")[0], 200)
        # On a terminal: its size, a resize, Ctrl-C to the foreground program.
        code, t = self.d.curl("POST", base + "/sessions", {"command": "sh", "tty": True, "args": [
            "-c", "stty size; read x; stty size; exec cat"]})
        self.assertEqual((code, t["tty"]), (201, True), t)
        self.assertIn(b"24 80", self.read_session(t["id"], b"24 80"))
        self.assertEqual(self.d.curl("POST", f"/v1/sessions/{t['id']}/resize",
                                     {"rows": 33, "cols": 77})[0], 200)
        self.assertEqual(self.d.request("POST", f"/v1/sessions/{t['id']}/input", b"go\n")[0], 200)
        self.assertIn(b"33 77", self.read_session(t["id"], b"33 77"))
        self.assertEqual(self.d.request("POST", f"/v1/sessions/{t['id']}/input", b"ping\n")[0],
                         200)
        self.read_session(t["id"], b"ping\r\nping\r\n")  # cat runs: ^C goes to it
        code, r = self.d.curl("POST", f"/v1/sessions/{t['id']}/signal", {"signal": "interrupt"})
        self.assertEqual(code, 200, r)
        code, r = self.d.curl("POST", f"/v1/sessions/{t['id']}/wait")
        self.assertEqual((r["status"], r["signal"]), ("signaled", signal.SIGINT), r)
        self.assertEqual(self.d.curl("GET", base)[1]["running"], 1)  # until it is closed
        self.assertEqual(self.d.curl("DELETE", f"/v1/sessions/{t['id']}")[0], 200)
        self.assertEqual(self.d.curl("GET", base)[1]["running"], 0)
        # An open session keeps the instance busy (no idle expiry); closing the instance
        # ends it.
        code, left = self.d.curl("POST", base + "/sessions", {"command": "sleep", "args": ["300"]})
        self.assertEqual(code, 201, left)
        self.assertEqual(self.d.curl("GET", base)[1]["running"], 1)
        self.assertEqual(self.d.curl("DELETE", base)[0], 200)
        code, r = self.d.curl("POST", f"/v1/sessions/{left['id']}/wait")
        self.assertEqual(code, 200, r)
        self.assertEqual(r["status"], "cancelled", r)  # killed with the instance
        code, r = self.d.curl("POST", base + "/sessions", {"command": "true"})
        self.assertEqual((code, r["error"]["code"]), (404, "not_found"), r)
        for pid in tree:
            self.assertTrue(wait_gone(pid, 10), f"pid {pid} of the instance outlived its close")

    @unittest.skipUnless(HAVE_BWRAP, "bubblewrap is not installed")
    def test_sandbox_run_connect_tty_instance(self):
        """--tty --instance: a terminal session inside the instance, on a pty of ours."""
        import fcntl
        import pty
        import struct
        import termios
        self.add_bwrap_box(self.d.root)
        i = self.open("walled")
        self.assertEqual(self.run_in("walled", i["id"], {"command": "sh", "args": [
            "-c", "echo kept > /tmp/note"]})[0], 200)
        pid, fd = pty.fork()
        if pid == 0:
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 29, 91, 0, 0))
                os.execv(SANDBOX_RUN, [SANDBOX_RUN, "--connect", self.d.sock, "--sandbox",
                                       "walled", "--instance", i["id"], "--tty", "--", "sh",
                                       "-c", "read x; echo got:$x; cat /tmp/note; stty size; "
                                       "exit 5"])
            finally:
                os._exit(99)
        try:
            time.sleep(0.3)
            os.write(fd, b"hi\r")
            got = daemon_test.read_pty_until(fd, "29 91")
            self.assertIn(b"got:hi", got)
            self.assertIn(b"kept", got)  # the instance's /tmp
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 5)
        finally:
            os.close(fd)

    def test_a_client_that_goes_away_cancels_its_exec_and_the_instance_goes_on(self):
        i = self.open("box")
        marker = os.path.join(self.d.root, "pid")
        c = self.d.conn()
        c.request("POST", f"/v1/sandboxes/box/instances/{i['id']}/exec", body=json.dumps(
            {"command": "sh", "args": ["-c", f"sleep 60 & echo $! > {marker}; wait"]}))
        pid = int(self.wait_file(marker))
        self.pids.append(pid)
        c.close()
        self.assertTrue(wait_gone(pid, 10), "the command outlived its client")
        end = time.monotonic() + 5
        while not self.events("client_gone") and time.monotonic() < end:
            time.sleep(0.05)
        self.assertEqual([a.get("instance") for a in self.events("client_gone")], [i["id"]])
        status, r = self.run_in("box", i["id"], {"command": "echo", "args": ["again"]})
        self.assertEqual((status, r["stdout"]), (200, "again\n"), r)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to become another uid")
    def test_bounds_per_uid_and_for_the_daemon_and_owners(self):
        self.add_shared_box()
        a = self.open("shared")
        self.open("box")
        status, r = self.d.request("POST", "/v1/sandboxes/box/instances")
        self.assertEqual((status, r["error"]["limit"]), (429, "daemon.max_instances_per_uid"), r)
        self.assertEqual(self.events("instance_refused")[0]["limit"],
                         "daemon.max_instances_per_uid")

        def as_nobody():
            got = [self.d.request("POST", "/v1/sandboxes/shared/instances")]
            got.append(self.d.request("POST", "/v1/sandboxes/shared/instances"))
            got.append(self.d.request("GET", f"/v1/sandboxes/shared/instances/{a['id']}"))
            got.append(self.d.request("POST", f"/v1/sandboxes/shared/instances/{a['id']}/exec",
                                      {"command": "true"}))
            got.append(self.d.request("DELETE", f"/v1/sandboxes/shared/instances/{a['id']}"))
            got.append(self.d.request("GET", "/v1/sandboxes/shared/instances"))
            return got

        mine, full, peek, use, close, listed = as_uid(65534, as_nobody)
        self.assertEqual(mine[0], 201, mine)
        self.assertEqual((full[0], full[1]["error"]["limit"]), (503, "daemon.max_instances"), full)
        for got in (peek, use, close):
            self.assertEqual((got[0], got[1]["error"]["code"]), (403, "forbidden"), got)
        self.assertEqual([x["id"] for x in listed[1]["instances"]], [mine[1]["id"]])
        # The operator sees every instance; a closed one makes room again.
        everyone = self.d.request("GET", "/v1/sandboxes/shared/instances")[1]["instances"]
        self.assertEqual({x["id"] for x in everyone}, {a["id"], mine[1]["id"]})
        self.assertEqual(self.d.request("DELETE", f"/v1/sandboxes/shared/instances/{a['id']}")[0],
                         200)
        self.open("box")

    def test_an_idle_instance_is_closed_and_a_busy_one_is_not(self):
        self.rewrite("  instance_idle: 10m\n", "  instance_idle: 1500ms\n")
        self.reload()
        i = self.open("box")
        path = f"/v1/sandboxes/box/instances/{i['id']}"
        status, r = self.run_in("box", i["id"], {"command": "sleep", "args": ["3"]})
        self.assertEqual((status, r["status"]), (200, "exited"), r)  # longer than the idle bound
        self.assertEqual(self.run_in("box", i["id"], {"command": "true"})[0], 200)
        end = time.monotonic() + 10
        while self.d.request("GET", path)[0] == 200 and time.monotonic() < end:
            time.sleep(0.1)
        self.assertEqual(self.d.request("GET", path)[0], 404)
        self.assertEqual([a["instance"] for a in self.events("instance_expired")], [i["id"]])

    def test_an_instance_keeps_working_across_a_reload_that_renames_its_sandbox(self):
        i = self.open("box")
        self.rewrite("\n  box:\n", "\n  renamed:\n")
        self.reload()
        status, r = self.run_in("box", i["id"], {"command": "echo", "args": ["still"]})
        self.assertEqual((status, r["stdout"]), (200, "still\n"), r)
        self.assertEqual(self.d.request("POST", "/v1/sandboxes/box/instances")[0], 404)

    def test_a_close_after_a_reload_under_a_running_exec(self):
        # The reload leaves the record the only holder of the old registry; the close drops
        # the record while the exec still runs in the instance: its runner must outlive both.
        i = self.open("box")
        marker = os.path.join(self.d.root, "started")
        got = {}

        def run():
            got["r"] = self.run_in("box", i["id"], {
                "command": "sh", "args": ["-c", f"echo $$ > {marker}; sleep 30"]})

        th = hostile_test.threading.Thread(target=run)
        th.start()
        self.pids.append(int(self.wait_file(marker)))
        self.rewrite("\n  box:\n", "\n  renamed:\n")
        self.reload()
        self.assertEqual(self.d.request("DELETE", f"/v1/sandboxes/box/instances/{i['id']}")[0],
                         200)
        th.join(30)
        self.assertFalse(th.is_alive())
        status, r = got["r"]
        self.assertEqual((status, r["error"]["code"]), (404, "instance_closed"), r)
        self.assertIsNone(self.d.proc.poll(), self.d.log())
        self.assertEqual(self.d.request("GET", "/v1/sandboxes")[0], 200)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to become another uid")
    def test_a_reload_that_revokes_run_as_ends_execs_in_the_instances_held(self):
        self.add_shared_box()
        opened = as_uid(65534, lambda: self.d.request("POST", "/v1/sandboxes/shared/instances"))
        self.assertEqual(opened[0], 201, opened)
        path = f"/v1/sandboxes/shared/instances/{opened[1]['id']}/exec"
        before = as_uid(65534, lambda: self.d.request("POST", path, {"command": "true"}))
        self.assertEqual(before[0], 200, before)
        self.rewrite("    run_as: daemon\n", "")
        self.reload()
        after = as_uid(65534, lambda: self.d.request("POST", path, {"command": "true"}))
        self.assertEqual((after[0], after[1]["error"]["code"]), (403, "forbidden"), after)

    @unittest.skipUnless(HAVE_BWRAP, "bubblewrap is not installed")
    def test_a_warm_pool_serves_one_shot_execs_one_sandbox_each(self):
        self.add_bwrap_box(self.d.root)
        self.rewrite("    backend: bwrap\n", "    backend: bwrap\n    settings: {warm: 1}\n")
        self.reload()
        exec_path = "/v1/sandboxes/walled/exec"
        status, r = self.d.request("POST", exec_path, {"command": "sh", "args": [
            "-c", "echo one > /tmp/left"]})  # cold: proves bwrap works, the pool fills
        self.assertEqual((status, r["exit_code"]), (200, 0), r)
        # Ready once primed: its init has the worker of the priming /bin/true (idle, kept)
        # beside bwrap and the init; the pool takes it a few loop turns after that.
        end = time.monotonic() + 20
        while len(instance_trees(self.d.proc.pid)) < 3 and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(0.2)
        warm = instance_trees(self.d.proc.pid)
        self.assertGreaterEqual(len(warm), 3, "no warm sandbox was opened and primed")
        status, r = self.d.request("POST", exec_path, {"command": "sh", "args": [
            "-c", "cat /tmp/left 2>&1; cat /proc/1/comm"]})
        self.assertEqual((status, r["backend"]), (200, "bwrap"), r)
        self.assertIn("No such file", r["stdout"])  # a fresh sandbox, not the cold one's
        self.assertTrue(r["stdout"].endswith("sandbox-init\n"), r)
        for pid in warm:  # it served that exec and was closed: no sandbox serves two
            self.assertTrue(wait_gone(pid, 10), f"warm sandbox pid {pid} outlived its exec")
        end = time.monotonic() + 20  # and was replaced
        while not instance_trees(self.d.proc.pid) and time.monotonic() < end:
            time.sleep(0.05)
        self.assertTrue(instance_trees(self.d.proc.pid))

    @unittest.skipUnless(HAVE_BWRAP, "bubblewrap is not installed")
    def test_sigterm_closes_the_instances_and_leaves_no_process(self):
        self.add_bwrap_box(self.d.root)
        self.open("walled")
        self.open("box")
        tree = descendants(self.d.proc.pid)
        self.assertTrue(instance_trees(self.d.proc.pid))
        self.d.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.d.proc.wait(30), 0)
        self.assertIn("2 instance(s)", self.d.log())
        for pid in tree:
            self.assertTrue(wait_gone(pid, 10), f"pid {pid} outlived the daemon")

    def test_bad_calls_are_classified(self):
        i = self.open("box")
        base = f"/v1/sandboxes/box/instances/{i['id']}"
        for path, body, status, code in (
                ("/v1/sandboxes/box/instances", {"command": "ls"}, 400, "validation"),
                ("/v1/sandboxes/box/instances", {"timeout": 5}, 400, "validation"),
                ("/v1/sandboxes/nope/instances", {}, 404, "not_found"),
                ("/v1/sandboxes/quick/instances/" + i["id"] + "/exec", {"command": "true"},
                 404, "not_found"),
                (base + "/exec", {"command": "true", "tty": True}, 400, "validation"),
                (base + "/exec", {"args": ["x"]}, 400, "validation"),
                (base + "/sessions", {"args": ["x"]}, 400, "validation"),
                (base + "/sessions", {"command": "cat", "net": {"mode": "deny_all"}}, 400,
                 "validation"),
                (base + "/nothing", {}, 404, "not_found")):
            got_status, r = self.d.request("POST", path, body)
            self.assertEqual((got_status, r["error"]["code"]), (status, code), (path, r))
        self.assertEqual(self.run_in("box", i["id"], {"command": "true"})[0], 200)

    def test_sandbox_run_connect_instance(self):
        i = self.open("box")
        run = [SANDBOX_RUN, "--connect", self.d.sock, "--sandbox", "box"]
        p = subprocess.run(run + ["--instance", i["id"], "--", "sh", "-c",
                                  "echo out; echo err >&2; exit 4"],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (4, "out\n", "err\n"))
        p = subprocess.run(run + ["--instance", "i-0", "--", "true"], capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 125)
        self.assertIn("not_found: no instance \"i-0\"", p.stderr)
        for bad in (["--instance", i["id"], "--stdin-file", "/dev/null"], ["--instance", ""]):
            p = subprocess.run(run + bad + ["--", "true"], capture_output=True, text=True,
                               timeout=60, stdin=subprocess.DEVNULL)
            self.assertEqual(p.returncode, 125, p.stderr)
            self.assertIn("--instance", p.stderr)
        # The instance closed under the command: what it wrote so far, the reason, 125.
        marker = os.path.join(self.d.root, "started")
        proc = subprocess.Popen(run + ["--instance", i["id"], "--", "sh", "-c",
                                       f"echo early; echo $$ > {marker}; sleep 60"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.pids.append(int(self.wait_file(marker)))
        os.unlink(marker)
        self.assertEqual(self.d.request("DELETE", f"/v1/sandboxes/box/instances/{i['id']}")[0],
                         200)
        out, err = proc.communicate(timeout=30)
        self.assertEqual((proc.returncode, out), (125, "early\n"), err)
        self.assertIn("instance_closed", err)
        i = self.open("box")
        # Interrupted: the daemon cancels the exec (its tree killed); the instance goes on.
        marker = os.path.join(self.d.root, "pid")
        proc = subprocess.Popen(run + ["--instance", i["id"], "--", "sh", "-c",
                                       f"sleep 60 & echo $! > {marker}; wait"],
                                stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pid = int(self.wait_file(marker))
        self.pids.append(pid)
        proc.send_signal(signal.SIGINT)
        self.assertEqual(proc.wait(30), 130)
        self.assertTrue(wait_gone(pid, 10), "the command outlived an interrupted sandbox-run")
        self.assertEqual(self.run_in("box", i["id"], {"command": "true"})[0], 200)


def main():
    global SANDBOX_RUN
    if len(sys.argv) < 3:
        sys.exit("usage: instances_test.py SANDBOXD SANDBOX_RUN [unittest args]")
    daemon_test.SANDBOXD = os.path.abspath(sys.argv.pop(1))
    SANDBOX_RUN = os.path.abspath(sys.argv.pop(1))
    hostile_test.SANDBOX_RUN = SANDBOX_RUN
    daemon_test.run_suite()


if __name__ == "__main__":
    main()
