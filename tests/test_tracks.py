"""Every track folder is whole: a valid spec, its notebook.py, its solutions, and a committed notebook that is
exactly what `workshop build` writes."""
from __future__ import annotations

import pytest

from graders import tracks
from workshop import notebooks

TRACKS = tracks.all_tracks()


def test_there_are_tracks_of_both_engines():
    assert {t.engine for t in TRACKS} == set(tracks.ENGINES)


@pytest.mark.parametrize("track", TRACKS, ids=lambda t: t.name)
def test_track_has_every_part(track):
    assert (track.folder / "notebook.py").is_file(), f"{track.folder}: no notebook.py"
    assert track.solutions.is_dir(), f"{track.folder}: no solutions/"
    for wrong in track.wrong_solutions():
        assert "expect:" in wrong.read_text(), f"{wrong}: no expect: line"


@pytest.mark.parametrize("track", TRACKS, ids=lambda t: t.name)
def test_committed_notebook_is_what_workshop_build_writes(track):
    assert not notebooks.is_stale(track), f"{track.notebook_path} is stale: run `workshop build {track.name}`"
