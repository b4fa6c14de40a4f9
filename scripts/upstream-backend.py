#!/usr/bin/env python3
"""Canonical `git http-backend` as a mirror's upstream under test: it can
answer slowly and it counts what it is asked. The front end is
/work/shared/tools/git-http-backend-server.py; this adds, before each
request, a line in a log and, for a POST, a wait.

usage: upstream-backend.py ROOT PORT
env:   REQUEST_LOG=FILE   append "METHOD PATH" for each request
       DELAY_SECS=N       wait N seconds (a float) before answering a POST
                          (an upstream slow to pack: a pull stays in flight)
"""
import importlib.util
import os
import time

BACKEND = "/work/shared/tools/git-http-backend-server.py"

spec = importlib.util.spec_from_file_location("backend", BACKEND)
backend = importlib.util.module_from_spec(spec)
spec.loader.exec_module(backend)  # reads ROOT and PORT from sys.argv

LOG = os.environ.get("REQUEST_LOG")
DELAY = float(os.environ.get("DELAY_SECS", "0"))


class Handler(backend.Handler):
    def _note(self):
        if LOG:
            with open(LOG, "a") as f:
                f.write(f"{self.command} {self.path}\n")

    def do_GET(self):
        self._note()
        super().do_GET()

    def do_POST(self):
        self._note()
        if DELAY > 0:
            time.sleep(DELAY)
        super().do_POST()


if __name__ == "__main__":
    os.makedirs(backend.ROOT, exist_ok=True)
    backend.Server(("127.0.0.1", backend.PORT), Handler).serve_forever()
