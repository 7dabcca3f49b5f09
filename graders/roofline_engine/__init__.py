"""The roofline engine: predict, then measure. A student predicts, for PyTorch operations at fixed shapes, the
regime that bounds each (memory, compute or overhead), its arithmetic intensity and its time on the course's
reference GPU (the spec's figures, which the notebook gives); the trusted grader measures every operation on the
grading worker's GPU and grades each prediction against the key and the measurement, translated to the reference
GPU where the worker's figures differ (`grade.translation`).

A roofline track (``[assignment] engine = "roofline"``) brings:

- ``problem.py`` (public: the student kit and every sandbox hold it): ``TITLE``, ``INTRO`` and ``OPERATIONS``, a
  list of `graders.roofline_engine.operations.Operation`: each one's code, the tensors it runs on, how many PyTorch
  operations it is and the peak its arithmetic runs at;
- ``key.py`` (read in nbgrader's trusted process only, like a quiz's key: `graders.quiz_engine`): ``WORK``, each
  operation's regime, FLOPs and bytes, and ``KEY``, the reference answers (their times derived from the
  reference GPU's figures in the spec: bytes over bandwidth, FLOPs over the peak, operations times the launch
  overhead);
- ``spec.toml``: the points of each part, the tolerances, the measurement's budget and ``[reference_gpu]``, the
  course's reference GPU's figures that the notebook gives.

Each operation is a solution cell ``<id> = {"regime": None, "intensity": None, "time_us": None}`` that the student
fills with literals, read by the trusted grader from the submitted file (`graders.submission`), never run, and a
graded cell: public, the answer's form (`grade.check_prediction`, all a machine without a GPU can check); hidden,
`grade.predict`. The grader measures every operation once per grading process in a sandboxed GPU child
(`child`: fresh inputs before each run, L2 flushed, the GPU idle when the operation's line starts, the median of
many runs; no student code runs there, and nothing of torch or CUDA enters nbgrader's process) and grades every
submission of the run against that one measurement (`scoring`). Without a GPU the grading stops with
`graders.gpu.NeedsGPUWorker`, as the CUDA tracks' does. The feedback states each operation's measurement and, for
a wrong regime, what the measurement shows; `feedback.RooflineFeedback` draws the worker's roofline with every
prediction and measurement on it.
"""
