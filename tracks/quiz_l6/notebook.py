"""The quiz_l6 track's nbgrader source notebook: built by the quiz engine from problem.py and key.py."""
from graders.quiz_engine.notebook import build as build_quiz


def build():
    return build_quiz("quiz_l6")
