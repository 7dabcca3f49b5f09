# The notebook's own output floods nbgrader while it runs: the first cell prints 1 GiB as 1024 messages of 1 MiB
# (the cell keeps its first 4 MiB of output, and a line says the rest was dropped), the last prints 512 MiB in
# one message (over the 8 MiB cap on one kernel message: it is never read, its channel closes and the notebook
# stops there, saying why; 1 GiB would not leave the kernel, whose JSON encoding of it passes the kernel's own
# 4 GiB cap once numba is loaded). The kernels are the reference's, and earn full marks.
# expect: map_correct=2 matmul_correct=2

# %% map+
import sys

line = "y" * ((1 << 20) - 1)
for _ in range(1024):
    print(line)
    sys.stdout.flush()

# %% matmul+
import sys

sys.stdout.write("z" * (512 << 20))
sys.stdout.flush()
