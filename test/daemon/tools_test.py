#!/usr/bin/env python3
"""Real tools through sandboxd (issue 33): pip downloads from a package index on the host's
loopback by the reserved name host.sandbox.internal, and git clones over HTTP from a server
on another loopback address (127.0.0.2) by a name the config document pins, both inside a
bwrap sandbox whose allow-list the document sets.
Usage: tools_test.py SANDBOXD"""
import functools
import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import threading
import unittest
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_test  # noqa: E402  (the Daemon fixture and process helpers)
from daemon_test import Daemon  # noqa: E402

DOC = """version: v1
daemon:
  audit_file: @DIR@/audit.jsonl
sandboxes:
  fetch:
    backend: bwrap
    root: @DIR@/ws
    defaults:
      timeout: 60s
      env: {allow: [LANG], inject: {PATH: /usr/bin:/bin, HOME: /tmp}}
      net:
        mode: allow_list
        allow_hosts: ["host.sandbox.internal:@PIP@", "git.test:@GIT@", "127.0.0.2:@GIT@"]
        resolve: {git.test: 127.0.0.2}
"""

PIP = ["/usr/bin/python3", "-m", "pip", "download", "-q", "--no-cache-dir", "--no-deps",
       "--disable-pip-version-check", "--retries", "0", "--timeout", "10",
       "--trusted-host", "host.sandbox.internal"]


def make_index(root):
    """A PEP 503 "simple" index of one pure-Python wheel under `root`."""
    os.makedirs(os.path.join(root, "simple", "sbxdemo"))
    wheel = os.path.join(root, "sbxdemo-1.0-py3-none-any.whl")
    files = {"sbxdemo/__init__.py": "VALUE = 42\n",
             "sbxdemo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: sbxdemo\nVersion: 1.0\n",
             "sbxdemo-1.0.dist-info/WHEEL":
                 "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr("sbxdemo-1.0.dist-info/RECORD",
                   "".join(n + ",,\n" for n in files) + "sbxdemo-1.0.dist-info/RECORD,,\n")
    with open(wheel, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(root, "simple", "sbxdemo", "index.html"), "w") as f:
        f.write(f'<a href="../../sbxdemo-1.0-py3-none-any.whl#sha256={digest}">'
                "sbxdemo-1.0-py3-none-any.whl</a>")


def make_repo(root):
    """A bare repository served over git's dumb HTTP protocol, under `root`/repo.git."""
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    work = os.path.join(root, "work")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run(git + ["init", "-q", work], check=True, env=env)
    with open(os.path.join(work, "file.txt"), "w") as f:
        f.write("pinned\n")
    subprocess.run(git + ["-C", work, "add", "file.txt"], check=True, env=env)
    subprocess.run(git + ["-C", work, "commit", "-qm", "one"], check=True, env=env)
    bare = os.path.join(root, "repo.git")
    subprocess.run(git + ["clone", "-q", "--bare", work, bare], check=True, env=env)
    subprocess.run(git + ["-C", bare, "update-server-info"], check=True, env=env)


class Server:
    """A threading HTTP server over `directory` at `address`, port chosen by the kernel."""

    def __init__(self, directory, address):
        handler = functools.partial(QuietHandler, directory=directory)
        self.httpd = http.server.ThreadingHTTPServer((address, 0), handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@unittest.skipUnless(shutil.which("bwrap") and os.path.exists("/usr/bin/git"),
                     "bubblewrap and git are needed")
class ToolsThroughTheDaemon(unittest.TestCase):
    def setUp(self):
        self.d = Daemon()
        os.chmod(self.d.dir, 0o755)  # the sandbox user (nobody, for a root daemon) reaches it
        os.chmod(self.d.root, 0o777)
        self.files = os.path.join(self.d.dir, "files")
        os.mkdir(self.files)
        make_index(self.files)
        make_repo(self.files)
        self.pip = Server(self.files, "127.0.0.1")
        self.git = Server(self.files, "127.0.0.2")
        self.d.write(DOC.replace("@PIP@", str(self.pip.port)).replace("@GIT@", str(self.git.port)))
        self.d.reload(self)

    def tearDown(self):
        self.d.stop()
        self.pip.stop()
        self.git.stop()

    def exec(self, argv):
        status, r = self.d.request("POST", "/v1/sandboxes/fetch/exec",
                                   {"command": argv[0], "args": argv[1:]}, timeout=120)
        self.assertEqual(status, 200, r)
        return r

    def connections(self):
        return [a for a in self.d.audit() if a.get("event") == "connection"]

    def test_pip_downloads_by_the_reserved_name_and_git_clones_by_a_pinned_name(self):
        url = f"http://host.sandbox.internal:{self.pip.port}/simple/"
        r = self.exec(["sh", "-c", " ".join(PIP) + f" -d /tmp/got --index-url {url} sbxdemo"
                       " && ls /tmp/got"])
        self.assertEqual((r["exit_code"], r["stdout"]), (0, "sbxdemo-1.0-py3-none-any.whl\n"),
                         r["stderr"])
        r = self.exec(["sh", "-c", f"cd /tmp && git clone -q http://git.test:{self.git.port}"
                       "/repo.git c && cat c/file.txt"])
        self.assertEqual((r["exit_code"], r["stdout"]), (0, "pinned\n"), r["stderr"])
        nets = [a["net"] for a in self.connections()]
        self.assertTrue(any(n.get("host") == "host.sandbox.internal" and
                            n.get("verdict") == "allowed" for n in nets), nets)
        self.assertTrue(any(n.get("host") == "git.test" and
                            n.get("dialed") == f"127.0.0.2:{self.git.port}" for n in nets), nets)
        # A port the document does not name stays closed, by either name.
        r = self.exec(["sh", "-c", f"git clone -q http://git.test:{self.pip.port}/repo.git /tmp/x"])
        self.assertNotEqual(r["exit_code"], 0)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: tools_test.py SANDBOXD [unittest args]")
    daemon_test.SANDBOXD = os.path.abspath(sys.argv.pop(1))
    prog = unittest.main(module="__main__", exit=False, verbosity=2)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
