"""The import path notebooks released before the engines were split use: see `graders.cuda_engine.grade`."""
from graders.cuda_engine.grade import check_compiles, score  # noqa: F401
