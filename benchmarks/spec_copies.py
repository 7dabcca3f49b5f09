"""Copies of a CUDA track's spec with some lines changed, for the benchmarks that grade a reference at another shape
or launch (`benchmarks.gemm_bench`) or a candidate beside it (`benchmarks.candidates`): the spec's text with every
``reference`` made absolute (the copy lives elsewhere), and one ``[[kernel]]`` table's lines set."""
from __future__ import annotations

import re

from graders.cuda_engine.spec import AssignmentSpec


def absolute_text(spec: AssignmentSpec) -> str:
    """The spec's text with each ``reference = "..."`` made an absolute path."""
    return re.sub(r'^reference = "(.*)"$', lambda m: f'reference = "{(spec.path.parent / m.group(1)).resolve()}"',
                  spec.path.read_text(), flags=re.M)


def with_kernel_lines(text: str, kernel_id: str, lines: dict[str, str]) -> str:
    """``text`` (a spec's) with each ``key = value`` of ``lines`` set in kernel ``kernel_id``'s table (`set_line`)."""
    head, sep, tail = text.partition(f'id = "{kernel_id}"')
    if not sep:
        raise ValueError(f"the spec has no kernel {kernel_id!r}")
    body, next_table, rest = tail.partition("[[kernel]]")
    for key, value in lines.items():
        body = set_line(body, key, value)
    return head + sep + body + next_table + rest


def set_line(table: str, key: str, value: str) -> str:
    """``table`` (a spec table's text) with ``key = value`` in place of the key's line (and the lines its bracketed
    value runs on), or added at its end."""
    found = re.search(rf"^{re.escape(key)} = ", table, flags=re.M)
    if not found:
        return table.rstrip("\n") + f"\n{key} = {value}\n\n"
    end, depth = found.end(), 0
    while end < len(table):
        char = table[end]
        depth += (char in "[{") - (char in "]}")
        if char == "\n" and depth == 0:
            break
        end += 1
    return table[:found.start()] + f"{key} = {value}" + table[end:]
