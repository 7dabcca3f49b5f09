"""The grading engine: sandboxed child processes, correctness checks, timing and scoring."""
