"""nbgrader's ``OverwriteCells`` without its false alarm on hidden tests (jupyter/nbgrader#1961).

``nbgrader generate_assignment`` saves each locked cell's checksum to the gradebook *before* it clears the
hidden tests, so a test cell handed back exactly as released never matches it: nbgrader's ``OverwriteCells``
logs "Attribute 'checksum' for cell ... has changed!" for every test cell of every submission, then restores
the cell. `OverwriteReleasedCells` restores a locked cell that is exactly as released (the gradebook's source
with the hidden tests cleared by nbgrader's own ``ClearHiddenTests``) before nbgrader compares, so the warning
is left for a cell a student did change.
"""
from __future__ import annotations

import copy

from nbformat import NotebookNode
from nbgrader.api import MissingEntry
from nbgrader.preprocessors import ClearHiddenTests, OverwriteCells


class OverwriteReleasedCells(OverwriteCells):
    """``OverwriteCells`` that takes a locked cell identical to its released version as unchanged."""

    def preprocess_cell(self, cell: NotebookNode, resources: dict, cell_index: int):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None:
            try:
                source = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except MissingEntry:
                source = None   # nbgrader's own preprocess_cell reports it
            if source is not None and source.locked and self._released(cell, source.source, resources) == cell.source:
                cell.source = source.source
        return super().preprocess_cell(cell, resources, cell_index)

    def _released(self, cell: NotebookNode, source: str, resources: dict) -> str:
        """``source`` as ``generate_assignment`` released it: without its hidden tests."""
        released = copy.deepcopy(cell)
        released.source = source
        ClearHiddenTests(parent=self).preprocess_cell(released, resources, 0)
        return released.source
