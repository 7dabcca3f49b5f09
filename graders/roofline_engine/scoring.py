"""Scoring one prediction against the key and the worker's measurement, and the lines the student reads.

Pure functions of their arguments: the measurement comes in as data (what `graders.roofline_engine.child`
answered), so every rule here is tested without a GPU.

- regime: right or not (the key's, `REGIMES`);
- intensity: within ``intensity_rel_tol`` (10%) of the key's FLOPs over bytes;
- time: the ratio r = max(predicted / measured, measured / predicted); full points for r <= ``time_full_within``
  (2), none for r >= ``time_none_beyond`` (4), between them a share linear in log r: (log 4 - log r) / (log 4 -
  log 2), that is 2 - log2(r) at the spec's 2 and 4 (`time_share`). The student predicts with the reference GPU's
  figures (the notebook's); on a worker whose figures differ (another GPU, slower launches) the measurement is
  first translated to the reference GPU: times ``scale``, the key's time on the reference GPU over the key's time
  on this worker's own figures (`graders.roofline_engine.grade.translation`).

What a measurement shows (`fractions`, `shown`): the bytes moved per second as a share of the worker's memory
bandwidth, the FLOPs per second as a share of the peak the operation's arithmetic runs at, and the launch overhead
of its PyTorch operations as a share of its time; the largest share names the regime the measurement shows.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from graders.roofline_engine.operations import PEAKS, REGIMES, Operation

PARTS = ("regime", "intensity", "time")
TRANSLATION_SHOWN = 0.005   # the report names the translated time where the scale differs from 1 by more


@dataclass(frozen=True)
class Rules:
    """The spec's points and tolerances (``[assignment]``: ``points_regime``, ``points_intensity``,
    ``points_time``, ``intensity_rel_tol``, ``time_full_within``, ``time_none_beyond``)."""

    points: dict[str, float]
    intensity_rel_tol: float = 0.10
    time_full_within: float = 2.0
    time_none_beyond: float = 4.0

    @classmethod
    def from_spec(cls, assignment: dict) -> Rules:
        return cls({part: float(assignment[f"points_{part}"]) for part in PARTS},
                   float(assignment["intensity_rel_tol"]), float(assignment["time_full_within"]),
                   float(assignment["time_none_beyond"]))

    @property
    def max_points(self) -> float:
        return sum(self.points.values())


@dataclass(frozen=True)
class Worker:
    """The grading worker's figures: the GPU's name, its memory bandwidth (bytes/s) and peak rates (FLOP/s, by
    `PEAKS` key: those known), L2 bytes, SMs, the launch overhead of one operation alone and what each further one
    in a stream of launches adds (s), both measured beside the operations."""

    gpu: str
    bandwidth: float
    peaks: dict[str, float]
    l2_bytes: int
    sms: int
    launch_s: float
    stream_s: float

    def overhead_s(self, operations: int) -> float:
        """The launch overhead of ``operations`` PyTorch operations in a row: the first alone, the rest in a stream."""
        return self.launch_s + (operations - 1) * self.stream_s

    def as_dict(self) -> dict:
        return asdict(self)


def worker(measurement: dict, reference: dict, datasheets: dict | None = None) -> Worker:
    """The worker of ``measurement`` (the child's answer): bandwidth and FP32 peak from its GPU's clocks and widths
    (`graders.cuda_engine.timing.peaks`), the tensor-core peaks (a datasheet's, not derivable from the clocks) from
    ``reference`` (the spec's ``[reference_gpu]``) where the worker is that GPU, else from ``datasheets`` (the spec's
    ``[datasheet_peaks]``, by GPU name) where it names it; the two launch figures as measured (a measurement
    without the in-stream one takes the reference's ``launch_in_stream_us``)."""
    env = measurement["environment"]
    same = env.get("gpu") == reference["name"]
    read = env.get("peaks", {})
    peaks = {"fp32": read.get("fp32") or (reference["fp32_tflops"] * 1e12 if same else None)}
    sheet = reference if same else (datasheets or {}).get(env.get("gpu"), {})
    peaks |= {name: sheet[f"{name}_tflops"] * 1e12 for name in ("tf32", "bf16", "fp8") if f"{name}_tflops" in sheet}
    bandwidth = read.get("dram") or (reference["hbm_tb_s"] * 1e12 if same else math.nan)
    stream = measurement.get("launch_in_stream_s", reference["launch_in_stream_us"] * 1e-6)
    return Worker(env.get("gpu", "?"), bandwidth, {k: v for k, v in peaks.items() if v}, int(env.get("l2_bytes", 0)),
                  int(env.get("sms", 0)), float(measurement["launch_overhead_s"]), float(stream))


def time_share(predicted_s: float, measured_s: float, rules: Rules) -> tuple[float, float]:
    """(the ratio r of the prediction to the measurement, whichever way is larger; the share of the time points)."""
    ratio = max(predicted_s / measured_s, measured_s / predicted_s)
    if ratio <= rules.time_full_within:
        return ratio, 1.0
    if ratio >= rules.time_none_beyond:
        return ratio, 0.0
    span = math.log(rules.time_none_beyond) - math.log(rules.time_full_within)
    return ratio, (math.log(rules.time_none_beyond) - math.log(ratio)) / span


def fractions(op: Operation, work: dict, measured_s: float, w: Worker) -> dict[str, float]:
    """What the measurement shows, as shares: ``memory`` (bytes/s over the bandwidth), ``compute`` (FLOP/s over
    the operation's peak; left out where the worker's is unknown), ``overhead`` (its operations' launch overhead,
    `Worker.overhead_s`, over its time)."""
    found = {"memory": work["bytes"] / measured_s / w.bandwidth,
             "overhead": w.overhead_s(op.operations) / measured_s}
    if w.peaks.get(op.peak):
        found["compute"] = work["flops"] / measured_s / w.peaks[op.peak]
    return {regime: found[regime] for regime in REGIMES if regime in found}


def shown(shares: dict[str, float]) -> str:
    """The regime a measurement shows: the largest of its `fractions`."""
    return max(shares, key=shares.get)


@dataclass(frozen=True)
class Graded:
    """One prediction graded: each part's points, the time's ratio, and what the measurement shows."""

    op: str
    answer: dict
    regime: str                  # the key's, and its FLOPs and bytes
    flops: float
    bytes: float
    measured_s: float            # on the worker
    samples: int
    scale: float                 # the measurement's translation to the reference GPU (`grade`)
    ratio: float                 # of the predicted time to the translated one, whichever way is larger
    time_share: float            # of the time points
    parts: dict[str, float]
    max_points: float
    shares: dict[str, float]     # what the measurement shows (`fractions`)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def translated_s(self) -> float:
        """The measurement translated to the reference GPU: what the prediction is graded against."""
        return self.measured_s * self.scale

    @property
    def points(self) -> float:
        return round(sum(self.parts.values()), 4)

    @property
    def shown(self) -> str:
        return shown(self.shares)

    def as_dict(self) -> dict:
        return asdict(self) | {"intensity": self.intensity, "points": self.points, "shown": self.shown,
                               "translated_s": self.translated_s}


def grade(op: Operation, answer: dict, work: dict, stats: dict, w: Worker, rules: Rules,
          scale: float = 1.0) -> Graded:
    """``answer`` (of the right form: `graders.roofline_engine.operations.form_problem`) against the key's ``work``
    (``regime``, ``flops``, ``bytes``) and the measurement's ``stats`` of this operation (``median_s``,
    ``samples``), its time against the measurement times ``scale`` (the key's time on the reference GPU over its
    time on this worker: 1 on a worker of the reference GPU's figures)."""
    intensity = work["flops"] / work["bytes"]
    measured = stats["median_s"]
    ratio, share = time_share(answer["time_us"] * 1e-6, measured * scale, rules)
    parts = {"regime": rules.points["regime"] * (answer["regime"] == work["regime"]),
             "intensity": rules.points["intensity"] * (abs(answer["intensity"] - intensity)
                                                       <= rules.intensity_rel_tol * intensity),
             "time": round(rules.points["time"] * share, 4)}
    return Graded(op.id, dict(answer), work["regime"], work["flops"], work["bytes"], measured,
                  int(stats.get("samples", 0)), scale, ratio, share, parts, rules.max_points,
                  fractions(op, work, measured, w))


def _rate(value: float, unit: str) -> str:
    return f"{value / 1e12:.3g} T{unit}/s" if value >= 1e12 else f"{value / 1e9:.3g} G{unit}/s"


def shows(op: Operation, g: Graded, w: Worker) -> str:
    """What the measurement shows, in words: the bandwidth and rate reached against the worker's peaks, and the
    launch overhead's share of the time."""
    moved, rate = g.bytes / g.measured_s, g.flops / g.measured_s
    parts = [f"{_rate(moved, 'B')} moved, {g.shares['memory']:.0%} of the {_rate(w.bandwidth, 'B')} memory "
             "bandwidth"]
    if "compute" in g.shares:
        parts.append(f"{_rate(rate, 'FLOP')}, {g.shares['compute']:.1%} of the {PEAKS[op.peak]} peak "
                     f"({_rate(w.peaks[op.peak], 'FLOP')})")
    else:
        parts.append(f"{_rate(rate, 'FLOP')} (this GPU's {PEAKS[op.peak]} peak is not known to the grader)")
    alone, stream = w.launch_s * 1e6, w.stream_s * 1e6
    launches = (f"1 launch, {alone:.1f} µs" if op.operations == 1 else
                f"{op.operations} launches, {alone:.1f} µs + {op.operations - 1} x {stream:.1f} µs")
    parts.append(f"{launches}: {g.shares['overhead']:.0%} of its time")
    return "; ".join(parts)


def report(op: Operation, g: Graded, w: Worker, rules: Rules) -> str:
    """The lines the student reads under the graded cell."""
    p, a = g.parts, g.answer
    way = "over" if a["time_us"] * 1e-6 > g.translated_s else "under"
    measured = f"  measured on the worker ({w.gpu}): {g.measured_s * 1e6:,.1f} µs (median of {g.samples} runs)"
    if abs(g.scale - 1) > TRANSLATION_SHOWN:
        measured += (f", {g.translated_s * 1e6:,.1f} µs on the reference GPU (x {g.scale:.3g}: the roofline's time "
                     "there over its time with this worker's figures)")
    lines = [f"{op.id}: {g.points:g} / {g.max_points:g} points",
             f"{measured}; you predicted {a['time_us']:,.4g} µs, {g.ratio:.2f}x {way} ({p['time']:g} / "
             f"{rules.points['time']:g} points: full within {rules.time_full_within:g}x, none beyond "
             f"{rules.time_none_beyond:g}x)"]
    if p["regime"]:
        lines.append(f"  regime: ✓ {a['regime']}")
    else:
        lines.append(f"  regime: ✗ you said {a['regime']}; the measurement shows {g.shown}: {shows(op, g, w)}")
    if p["intensity"]:
        lines.append(f"  intensity: ✓ {a['intensity']:.4g} FLOP/byte")
    else:
        lines.append(f"  intensity: ✗ {a['intensity']:.4g} FLOP/byte is not this operation's (right within "
                     f"{rules.intensity_rel_tol:.0%}): its FLOPs over the bytes it reads and writes, each input "
                     "read once and the output written once")
    return "\n".join(lines)
