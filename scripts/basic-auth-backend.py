#!/usr/bin/env python3
"""Canonical `git http-backend` behind HTTP Basic auth, as a web server puts
it there (git-http-backend(1), "Apache 2.x": `AuthType Basic`, `Require`
per service, and `AuthzSendForbiddenOnFailure On` so that a known user
without the right gets 403 rather than another 401). The front end is
/work/shared/tools/git-http-backend-server.py; this adds the check before it.

usage: basic-auth-backend.py ROOT PORT
env:   BASIC_AUTH_USERS="name:password:level,..."  (level: read or write)

Rules: upload-pack (clone, fetch) needs a read or write user; receive-pack
(push) a write user. No credentials, or a wrong password: 401 with
`WWW-Authenticate: Basic realm="gitstow"`; a user without the level: 403.
"""
import base64
import importlib.util
import os
import sys

BACKEND = "/work/shared/tools/git-http-backend-server.py"

spec = importlib.util.spec_from_file_location("backend", BACKEND)
backend = importlib.util.module_from_spec(spec)
spec.loader.exec_module(backend)  # reads ROOT and PORT from sys.argv

USERS = {}
for item in os.environ.get("BASIC_AUTH_USERS", "").split(","):
    if item:
        name, password, level = item.split(":")
        USERS[name] = (password, level)


class Handler(backend.Handler):
    def _deny(self, status, message):
        body = (message + "\n").encode()
        self.send_response(status)
        if status == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="gitstow"')
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True  # any request body is left unread

    def _allowed(self):
        needed = "write" if "git-receive-pack" in self.path else "read"
        value = self.headers.get("Authorization", "")
        if not value.startswith("Basic "):
            self._deny(401, "Unauthorized")
            return False
        try:
            user, _, password = base64.b64decode(value[6:], validate=True).decode().partition(":")
        except Exception:
            self._deny(401, "Unauthorized")
            return False
        known = USERS.get(user)
        if not known or known[0] != password:
            self._deny(401, "Unauthorized")
            return False
        if needed == "write" and known[1] != "write":
            self._deny(403, "Forbidden")
            return False
        return True

    def do_GET(self):
        if self._allowed():
            super().do_GET()

    def do_POST(self):
        if self._allowed():
            super().do_POST()


if __name__ == "__main__":
    os.makedirs(backend.ROOT, exist_ok=True)
    backend.Server(("127.0.0.1", backend.PORT), Handler).serve_forever()
