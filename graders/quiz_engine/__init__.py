"""The quiz engine: a lecture's questions answered as literals in solution cells, graded by the trusted grader.

A quiz track (``[assignment] engine = "quiz"``) brings its questions in ``problem.py`` (``QUESTIONS``, built from
`graders.quiz_engine.questions`: `Choice`, `Numeric`, `Line`) and its answer key in ``key.py`` (``KEY``: question id
-> a choice's letter, a line number, or for a numeric question a function of the student's numbers). Each question
is one solution cell (``<id> = None``, the student writes the literal) and one graded cell whose hidden test is
`graders.quiz_engine.grade.grade_answer`, called by the trusted grader with the literal parsed from the solution
cell (`graders.submission`); no student code runs, so no sandboxed child is needed. A CUDA track may bring questions
the same way beside its kernels (``QUESTIONS`` in its ``problem.py``, ``KEY`` in its ``key.py``; the debugging track's
diagnosis and deep-read), its notebook making the same two cells per question.

Where the key lives: ``key.py`` is none of the grader files (`graders.tracks.GRADER_FILES`), which go into the
student kit and are visible inside every sandbox (a notebook's kernel could print them into its feedback). It is
read only in nbgrader's trusted process; a grading worker's copy holds it (`workshop.staging.worker_files`).

Per-student numbers: a numeric question's numbers are drawn from a seed derived from the assignment, the question
and the student's id (`questions.student_seed`), so two students get different numbers and the same student the
same ones every time. The student id is nbgrader's: the trusted grader takes it from the submission's resources
(the ``submitted/<student>/`` folder, `graders.hidden_tests.grading_student`), never from the notebook; in the
notebook, the question's cell prints the numbers of `questions.notebook_student` (``WORKSHOP_STUDENT``, else the
name ``nbgrader submit`` files the submission under), so what a student sees is what they are graded on. Nothing
per student is released or stored: the seed is recomputed from the id on both sides. The graded cell's feedback
restates the numbers it graded with.

The source notebook's solution cells hold the key's answers for the student ``reference``
(`questions.REFERENCE_STUDENT`; run it with ``WORKSHOP_STUDENT=reference``).
"""
