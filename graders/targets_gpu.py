"""Which GPU a track's speed targets were measured on, and what a grading on another GPU model says about it.

A spec whose ``targets = "measured"`` names the records they come from (``measured_in``: paths under the checkout,
`graders.settings.ROOT`); each record (`workshop.records`) names the GPU it ran on in its top-level ``"gpu"``.
Speed ratios differ between GPU models (most where a kernel is bound by something else than the baseline is), so a
grading on a model the targets were not measured on compares against another GPU's
references: even a reference kernel may get only part of the speed points. Nothing here changes a grade:
`gpu_curve` adds the GPUs to a result's ``details["curve"]``, `student_note` is the line the student's report adds,
`ta_lines` the line the autograde log adds, once per track, and `targets_note` what a notebook says of the targets.
A spec with provisional targets (no ``measured_in``) names no GPU. Only the graders' parent side and the notebook
builders import this module (never a grading child: it is no part of a measurement).
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Iterable

from graders import settings


def measured_on(measured_in: Iterable[str]) -> tuple[str, ...]:
    """The GPUs (each once, in the records' order) of the records ``measured_in`` names; a record that is missing,
    unreadable or names no GPU is skipped."""
    return _measured_on(str(settings.ROOT), tuple(measured_in))


@functools.lru_cache(maxsize=64)
def _measured_on(root: str, records: tuple[str, ...]) -> tuple[str, ...]:
    found: list[str] = []
    for name in records:
        try:
            gpu = json.loads((Path(root) / name).read_text()).get("gpu")
        except Exception:   # missing, unreadable, not JSON, not a JSON object: a note is never a grader's error
            continue
        if isinstance(gpu, str) and gpu and gpu not in found:
            found.append(gpu)
    return tuple(found)


def gpu_curve(track: str, measured_in: Iterable[str], graded_on: str | None) -> dict:
    """What a result's ``details["curve"]`` adds: ``measured_on`` (the GPUs the targets were measured on, empty for
    provisional targets), ``track`` and, where the grading GPU is known (``graded_on``, the grading child's
    ``environment``), ``graded_on``."""
    curve = {"measured_on": list(measured_on(measured_in)), "track": track}
    if isinstance(graded_on, str) and graded_on:
        curve["graded_on"] = graded_on
    return curve


def other_gpu(curve: dict) -> tuple[list[str], str] | None:
    """(the GPUs the targets were measured on, the grading GPU) where ``curve`` (a result's ``details["curve"]``)
    says the grading ran on a GPU the targets were not measured on; None otherwise, or where either is unknown."""
    measured, graded = curve.get("measured_on") or [], curve.get("graded_on")
    if not measured or not graded or graded in measured:
        return None
    return list(measured), graded


def _names(gpus: list[str]) -> str:
    return " and ".join(gpus)


def targets_note(targets: str, measured_in: Iterable[str]) -> str:
    """What a notebook's statement says after a kernel's speed targets: that provisional ones are provisional, and
    on which GPU measured ones were measured (nothing where no record names one)."""
    if targets == "provisional":
        return " (provisional until measured on the grading GPU)"
    gpus = measured_on(measured_in)
    return f" (targets measured on {_names(list(gpus))})" if gpus else ""


def student_note(curve: dict) -> str | None:
    """The report's line where the grading ran on another GPU than the targets' (`other_gpu`), else None."""
    found = other_gpu(curve)
    if found is None:
        return None
    measured, graded = found
    return (f"note: the speed targets were measured on {_names(measured)}, and this grading ran on {graded}: your "
            "speed points compare against another GPU's references (even a reference kernel may get only part of "
            "them here)")


def ta_line(curve: dict) -> str | None:
    """The autograde log's line where the grading ran on another GPU than the targets' (`other_gpu`), else None."""
    found = other_gpu(curve)
    if found is None:
        return None
    (measured, graded), track = found, curve.get("track") or "TRACK"
    return (f"{track}: speed targets measured on {_names(measured)}, this grading ran on {graded}: speed points "
            f"compare against another GPU's references. Re-measure them on this GPU: `bash benchmarks/gpu_trusted.sh "
            f"regrade {track}`, then `workshop targets {track} RECORD... --write`")


def ta_lines(results: Iterable[dict]) -> list[str]:
    """`ta_line` of each track (and grading GPU) among ``results`` (`graders.result.GradeResult.as_dict`'s), once."""
    lines: list[str] = []
    for result in results:
        curve = result.get("curve")
        line = ta_line(curve) if isinstance(curve, dict) else None
        if line is not None and line not in lines:
            lines.append(line)
    return lines
