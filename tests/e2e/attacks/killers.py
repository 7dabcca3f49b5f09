# A notebook that takes its own kernel down: a fork bomb, then the kernel killed outright. The trusted
# grader reads the kernels from the file, so the honest kernels keep all their points.
# expect: dot_correct=2 conv1d_correct=2

# %% dot+
# A fork bomb, bounded so that a machine without a process cap survives it.
import os
import time

for _ in range(3000):
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    except OSError as exc:
        print("fork refused:", exc)
        break

# %% conv1d+
# Kill the notebook's kernel: the cells after this one never run.
import os

os._exit(1)
