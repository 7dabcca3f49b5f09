"""``jupyter lab ARGS`` as a user's session, for the README test (tests/e2e/test_readme.py): start the server
(its port and token come from the user's Jupyter config the test writes, LAB_PORT and LAB_TOKEN here), wait until
it serves, start a Python kernel and run a line in it over the kernel's websocket as JupyterLab does, list
formgrader's assignments (status, submissions, points), stop the server, then print what it logged. Exit status 1
when any step fails. It runs with the README's activated venv (tornado is jupyter_server's)."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

BASE = f"http://127.0.0.1:{os.environ['LAB_PORT']}"
HEADERS = {"Authorization": f"token {os.environ['LAB_TOKEN']}"}


def call(method: str, path: str, body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(BASE + path, data=data, method=method, headers=HEADERS)
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read()
        return json.loads(text) if text else None


def until(check, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = check()
            if found:
                return found
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not in {timeout:g} s")
        time.sleep(0.3)


async def run_line(kernel_id: str, code: str, timeout: float = 60) -> str:
    """What ``code`` printed, run in the kernel through the server's websocket."""
    url = f"{BASE.replace('http', 'ws')}/api/kernels/{kernel_id}/channels?session_id={uuid.uuid4().hex}"
    socket = await websocket_connect(HTTPRequest(url, headers=HEADERS))
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": "execute_request", "session": uuid.uuid4().hex, "username": "",
              "version": "5.3", "date": ""}
    socket.write_message(json.dumps({"header": header, "parent_header": {}, "metadata": {}, "channel": "shell",
                                     "content": {"code": code, "silent": False, "store_history": False,
                                                 "user_expressions": {}, "allow_stdin": False}, "buffers": []}))
    printed = []
    while True:
        message = json.loads(await asyncio.wait_for(socket.read_message(), timeout))
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if message["msg_type"] == "stream":
            printed.append(message["content"]["text"])
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":   # after outputs
            socket.close()
            return "".join(printed)


def session(server: subprocess.Popen) -> None:
    until(lambda: server.poll() is None and call("GET", "/api/status"), "the server answering")
    kernel = call("POST", "/api/kernels", {"name": "python3"})
    printed = asyncio.run(run_line(kernel["id"], "print(6 * 7)"))
    if printed != "42\n":
        raise RuntimeError(f"the kernel printed {printed!r} for print(6 * 7)")
    print("kernel: ran print(6 * 7)")
    call("DELETE", f"/api/kernels/{kernel['id']}")
    for a in sorted(call("GET", "/formgrader/api/assignments"), key=lambda a: a["name"]):
        print(f"formgrader: {a['name']} {a['status']}, {a['num_submissions']} submission(s), max {a['max_score']:g}")


def main() -> int:
    with tempfile.TemporaryFile("w+") as log:
        server = subprocess.Popen(["jupyter", "lab", *sys.argv[1:]], stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        failed = None
        try:
            session(server)
        except Exception as exc:   # reported with the server's log below
            failed = f"{type(exc).__name__}: {exc}"
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        log.seek(0)
        print(log.read())
    if failed:
        print(f"lab_session: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
