"""Entry point of a sandboxed child: ``python -m graders.sandbox.child MODULE FD``.

Reads the JSON request from stdin, calls ``MODULE.handle(request)`` and writes its JSON answer to file
descriptor FD, a pipe only the parent reads. An exception in the handler is an answer too
(``{"error": ...}``), so the parent can tell "the student's code failed" from "the child died".
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import traceback


def main() -> None:
    module_name, fd = sys.argv[1], int(sys.argv[2])
    channel = os.fdopen(fd, "w")
    request = json.loads(sys.stdin.read())
    try:
        answer = importlib.import_module(module_name).handle(request)
    except Exception as exc:  # the handler's own failure is reported, not raised
        answer = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=8)}
    channel.write(json.dumps(answer))
    channel.close()


if __name__ == "__main__":
    main()
