"""The import path notebooks released before the engines were split use: see `graders.cuda_engine.structure`."""
from graders.cuda_engine.structure import (  # noqa: F401
    autotune, check_sass, check_search, score_autotuned, tune_launch)
