"""Entry point of a sandboxed child: ``python -m graders.sandbox.child MODULE FD``, or ``--serve FD``.

Reads the JSON request from stdin, calls ``MODULE.handle(request)`` and writes its JSON answer to file
descriptor FD, a pipe only the parent reads. An exception in the handler is an answer too
(``{"error": ...}``), so the parent can tell "the student's code failed" from "the child died".

With ``--serve`` (`graders.sandbox.session`) it answers request after request, each a line of JSON
``{"handler": MODULE, "request": ...}`` on stdin, each answer a line ``{"answer": ..., "again": bool}`` on FD.
``again`` is false, and the child exits, after a handler's error and after any answer its module's
``reusable(answer)`` refuses (a module without ``reusable`` serves one request): a CUDA error, say, leaves
the process unfit for the next one.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import traceback


def answer(module_name: str, request: dict) -> tuple[dict, bool]:
    """(``MODULE.handle(request)`` or the error it raised, whether this process may serve another request)."""
    module = importlib.import_module(module_name)
    try:
        found = module.handle(request)
    except Exception as exc:  # the handler's own failure is reported, not raised
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=8)}, False
    reusable = getattr(module, "reusable", None)
    return found, bool(reusable and reusable(found))


def serve(channel) -> None:
    for line in sys.stdin:
        message = json.loads(line)
        found, again = answer(message["handler"], message["request"])
        channel.write(json.dumps({"answer": found, "again": again}) + "\n")
        channel.flush()
        if not again:
            return


def main() -> None:
    if sys.argv[1] == "--serve":
        with os.fdopen(int(sys.argv[2]), "w") as channel:
            serve(channel)
        return
    module_name, fd = sys.argv[1], int(sys.argv[2])
    channel = os.fdopen(fd, "w")
    found, _ = answer(module_name, json.loads(sys.stdin.read()))
    channel.write(json.dumps(found))
    channel.close()


if __name__ == "__main__":
    main()
