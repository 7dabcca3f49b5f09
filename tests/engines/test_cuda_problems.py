"""The shared pieces of the CUDA problem kinds (`graders.cuda_engine.problems`), on CPU tensors."""
import pytest
import torch

from graders.cuda_engine.problems import copy_bytes, kinds, matrix_bytes, problem, random_matrix, tiles


def test_random_matrix_is_fp32_from_the_generator():
    first = random_matrix((3, 5), torch.Generator().manual_seed(7))
    again = random_matrix((3, 5), torch.Generator().manual_seed(7))
    other = random_matrix((3, 5), torch.Generator().manual_seed(8))
    assert len(first) == 1 and first[0].shape == (3, 5) and first[0].device.type == "cpu"
    assert torch.equal(first[0], again[0]) and not torch.equal(first[0], other[0])
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert random_matrix((2, 2), torch.Generator().manual_seed(7))[0].dtype == torch.float32
    finally:
        torch.set_default_dtype(default)


def test_copy_bytes_copies_the_first_input_whatever_the_shapes():
    source = torch.arange(15, dtype=torch.float32).reshape(3, 5)
    out = torch.zeros(5, 3)
    copy_bytes(out, [source, torch.full((3, 5), -1.0)])
    assert torch.equal(out.view(-1), source.view(-1))


@pytest.mark.parametrize("shape, tile, grid", [
    ((33, 65), (32, 8), (3, 5, 1)),    # cols over tile x, rows over tile y, rounded up
    ((64, 32), (32, 8), (1, 8, 1)),    # exact multiples: no extra block
    ((1, 1), (32, 32), (1, 1, 1)),
])
def test_tiles_cover_the_matrix_with_whole_blocks(shape, tile, grid):
    assert tiles(shape, tile) == grid


def test_matrix_bytes_counts_one_read_and_one_write_of_fp32():
    assert matrix_bytes((3, 5)) == 2 * 4 * 15


def test_unknown_kind_lists_the_known_ones():
    with pytest.raises(KeyError) as info:
        problem("fft")
    assert info.value.args[0] == f"no problem kind 'fft'; known kinds: {', '.join(kinds())}"
