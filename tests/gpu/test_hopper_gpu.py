"""The Hopper worklog and the engine's Hopper launches on a real GPU (an H100 or H200: sm_90a).

Run on a GPU worker: ``python3 -m pytest -m gpu tests/gpu/test_hopper_gpu.py -x -q -s`` (``-s`` shows the table).
The kernels' compiles for sm_90a and their SASS are checked on machines without a GPU (tests/tracks/test_hopper.py);
these tests run them.

- the launches themselves, in this process (`graders.cuda_engine.child.Harness`): a probe kernel launched with a
  cluster of 2 blocks, 200,000 bytes of dynamic shared memory and a tensor map over A reads its cluster size, its
  dynamic shared memory and the tile the TMA copied; a persistent launch (one block an SM, in clusters of two)
  stores every box of C through a tensor map over the fp32 output in the 128-byte swizzle, as the persistent
  step's epilogue does; a spec asking for more than the device's opt-in limit is refused in words;
- every reference graded as a submission is (sandboxed child, cuBLAS bf16 timed in the same child): correct at every
  check shape, before and after timing; the TFLOP/s, ratio to cuBLAS and points at the spec's 4096^3 printed and
  written to ``benchmarks/results/hopper/hopper-<date-time>.json`` (and ``$OUT``) with the worklog's chart, the
  record ``workshop targets hopper`` reads. 8192^3:
  ``WORKSHOP_SANDBOX=off python -m benchmarks.gemm_bench --track hopper --sizes 4096 8192 --timing-only``;
- every known-wrong solution ends in a status of its ``status:`` line with its ``expect:`` points.

nbgrader's grading of the reference (full marks), the untouched stub (0) and the
known-wrong solutions (their ``expect:`` points) is tests/gpu/test_tracks_nbgrader_gpu.py's, over every CUDA track:
``-k hopper``.
"""
import json
import os
import shutil

import numpy as np
import pytest

from graders import tracks
from graders.cuda_engine.grade import grade_kernel, report
from graders.cuda_engine.spec import load_spec, make_geometry
from graders.cuda_engine.worklog_chart import plot
from workshop import records

pytestmark = pytest.mark.gpu

SPEC = load_spec("hopper")
BUDGET_S = float(os.environ.get("HOPPER_TEST_BUDGET_S", "2.0"))   # per grading here
WRONG = tracks.get("hopper").wrong_solutions()
PROBE_SMEM = 200_000
# One thread a block: what the launch gave it (its cluster's size and its rank in it, its dynamic shared memory)
# and the first element of the A tile a TMA copy of the first tensor map brought, at the block's (k = 0, m0).
PROBE = r"""
typedef unsigned short bf16;
struct __align__(64) CUtensorMap { unsigned long long opaque[16]; };

extern "C" __global__ void probe(float* C, const bf16* A, const bf16* B, int M, int N, int K,
                                 const __grid_constant__ CUtensorMap mapA)
{
    extern __shared__ __align__(1024) unsigned char dynamic[];
    __shared__ __align__(8) unsigned long long bar;
    unsigned cluster_size, rank, smem_size;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(cluster_size));
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(smem_size));
    const unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
    const unsigned tile = ((unsigned)__cvta_generic_to_shared(dynamic) + 1023) & ~1023u;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(TILE_Y * BK * 2) : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                     "[%0], [%1, {%2, %3}], [%4];"
                     :: "r"(tile), "l"(reinterpret_cast<unsigned long long>(&mapA)), "r"(0),
                        "r"((int)(blockIdx.y * TILE_Y)), "r"(b) : "memory");
        unsigned done = 0;
        while (!done)
            asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                         "selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(b), "r"(0) : "memory");
        unsigned short first;
        asm volatile("ld.shared.u16 %0, [%1];" : "=h"(first) : "r"(tile));
        float* out = C + (size_t)blockIdx.y * N + 4 * blockIdx.x;
        out[0] = (float)cluster_size;
        out[1] = (float)rank;
        out[2] = (float)smem_size;
        out[3] = __uint_as_float((unsigned)first << 16);
    }
}
"""


# A persistent grid's blocks take the 64 x 32 boxes of C in turn; each writes its box into shared memory in the
# 128-byte swizzle (the persistent reference's arithmetic) and stores it with a TMA store through the map over C.
# C[r][c] = r * N + c + 65536 x gridDim.x: the store's place and swizzle, and the grid the launch gave.
PROBE_STORE = r"""
typedef unsigned short bf16;
struct __align__(64) CUtensorMap { unsigned long long opaque[16]; };

extern "C" __global__ void probe_store(float* C, const bf16* A, const bf16* B, int M, int N, int K,
                                       const __grid_constant__ CUtensorMap mapC)
{
    extern __shared__ unsigned char dynamic[];
    const unsigned box = ((unsigned)__cvta_generic_to_shared(dynamic) + 1023) & ~1023u;
    const int across = N / 32;
    for (int b = blockIdx.x; b < (M / 64) * across; b += gridDim.x) {
        const int r0 = 64 * (b / across), c0 = 32 * (b % across);
        for (int e = threadIdx.x; e < 64 * 32; e += blockDim.x) {
            const int r = e / 32, byte = 4 * (e % 32);
            const unsigned at = box + r * 128 + ((((byte >> 4) ^ (r % 8)) << 4) | (byte & 15));
            const float value = (float)((r0 + r) * N + c0 + e % 32) + 65536.0f * gridDim.x;
            asm volatile("st.shared.f32 [%0], %1;" :: "r"(at), "f"(value) : "memory");
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        if (threadIdx.x == 0) {
            asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                         :: "l"(reinterpret_cast<unsigned long long>(&mapC)), "r"(c0), "r"(r0), "r"(box)
                         : "memory");
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
"""


def probe_harness(features):
    from graders.cuda_engine.child import Harness
    from graders.cuda_engine.problems import problem
    geometry = make_geometry((128, 1), (128, 64), params={"BK": 64})
    return Harness(problem("bf16gemm_kmajor"), geometry, 0.25, 7, features)


def test_a_cluster_dynamic_shared_memory_and_a_tensor_map_reach_the_kernel():
    import torch

    from graders.cuda_engine.extended_launch import LaunchFeatures, TensorMapSpec
    features = LaunchFeatures("sm_90a", PROBE_SMEM, (2, 1), (TensorMapSpec("A", ("BK", "TILE_Y")),))
    harness = probe_harness(features)
    harness.load(PROBE, "probe")
    shape = (128, 512, 128)   # a grid of 4 x 2 blocks: 2 clusters of 2 in each row
    inputs = harness.inputs(shape)
    _, out = harness.output(shape)
    harness.synchronize()
    harness.launch(out, inputs, shape)
    harness.synchronize()
    a = inputs[0].float()
    for by in range(2):
        for bx in range(4):
            size, rank, smem, first = out[by, 4 * bx:4 * bx + 4].tolist()
            assert (size, rank, smem) == (2, bx % 2, PROBE_SMEM), (by, bx)
            assert first == float(a[64 * by, 0]), (by, bx)
    torch.cuda.synchronize()


def test_a_persistent_launch_gets_one_block_an_sm_and_stores_c_through_a_tensor_map():
    """At 8 tiles of 128 x 64 the grid is 8 blocks; at 256 it is the SM count, in whole clusters of two."""
    import torch

    from graders.cuda_engine.extended_launch import LaunchFeatures, TensorMapSpec
    features = LaunchFeatures(arch="sm_90a", dynamic_smem=9216, cluster=(2, 1),
                              tensor_maps=(TensorMapSpec("C", (32, 64)),), persistent=True)
    harness = probe_harness(features)
    harness.load(PROBE_STORE, "probe_store")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for shape in [(128, 512, 64), (1024, 2048, 64)]:
        inputs = harness.inputs(shape)
        _, out = harness.output(shape)
        harness.synchronize()
        harness.launch(out, inputs, shape)
        harness.synchronize()
        blocks = max(2, min(shape[1] // 128 * (shape[0] // 64), sms) // 2 * 2)
        expected = torch.arange(shape[0] * shape[1], device="cuda", dtype=torch.float32).view(shape[0], shape[1])
        assert torch.equal(out, expected + 65536.0 * blocks), shape


def test_more_dynamic_shared_memory_than_the_device_allows_is_refused_in_words():
    from cuda.bindings import driver

    from graders.cuda_engine.extended_launch import LaunchFeatures
    err, limit = driver.cuDeviceGetAttribute(
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0)
    assert err == driver.CUresult.CUDA_SUCCESS and limit >= PROBE_SMEM
    harness = probe_harness(LaunchFeatures("sm_90a", limit + 1))
    with pytest.raises(ValueError) as caught:
        harness.load(PROBE, "probe")
    assert str(caught.value).startswith(f"the spec asks for {limit + 1} bytes of dynamic shared memory per block; ")
    assert str(caught.value).endswith(f"allows at most {limit} (its opt-in limit per block)")


def grade(kernel_id: str, source: str) -> dict:
    result = grade_kernel("hopper", kernel_id, source, budget_s=BUDGET_S)
    print("\n" + report(result))
    return result.as_dict()


def table(rows: dict) -> str:
    lines = [f"{'step':<10}{'status':<10}{'TFLOP/s':>9}{'cuBLAS':>9}{'% cuBLAS':>10}{'points':>8}"]
    for kid, r in rows.items():
        lines.append(f"{kid:<10}{r['status']:<10}{r['gflops'] / 1e3:>9.1f}{r['cublas_gflops'] / 1e3:>9.1f}"
                     f"{100 * r['ratio']:>9.1f}%{r['score']['total']:>8.2f}" if "ratio" in r
                     else f"{kid:<10}{r['status']:<10}  {r['message'][:90]}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def rows() -> dict:
    found, checks, environment = {}, {}, None
    for kid, kernel in SPEC.kernels.items():
        result = grade(kid, kernel.reference.read_text())
        found[kid] = records.gemm_row(result)
        checks[kid] = result.get("checks", [])
        environment = environment or result.get("environment")
    shape = records.label(SPEC.kernel("pipeline").perf_shape)
    fields = {"environment": environment, "targets_in_spec": SPEC.targets, "graded_shape": shape,
              "sizes": {shape: records.gemm_size_entry(found)}}
    path = records.write_gpu_record("hopper", "the Hopper worklog's references graded at the spec's shape", fields,
                                    track="hopper")
    chart = plot(json.loads(path.read_text()), path.with_suffix(".png"), **records.WORKLOGS["hopper"]["chart"])
    if os.environ.get("OUT"):
        shutil.copy(chart, os.environ["OUT"])
    print(f"\n{shape}, bf16 in, fp32 accumulate and out\n" + table(found) + f"\nwrote {path} and {chart.name}")
    return {kid: row | {"checks": checks[kid]} for kid, row in found.items()}


def test_every_reference_is_correct_at_every_check_shape(rows):
    for kid, row in rows.items():
        assert row["status"] == "ok", f"{kid}: {row['message']} {row.get('stderr_tail', '')}"
        assert row["score"]["correctness"] == SPEC.kernel(kid).points_correct
        shapes = {tuple(c["shape"]) for c in row["checks"] if c["ok"]}
        assert shapes >= set(SPEC.kernel(kid).check_shapes) | {SPEC.kernel(kid).perf_shape}, kid


def test_each_step_is_faster_than_the_one_before(rows):
    """The worklog's order: each step's hypothesis is that it is faster (printed with the table)."""
    ratios = [rows[kid]["ratio"] for kid in SPEC.kernels]
    print("\nratios to cuBLAS: " + ", ".join(f"{kid} {100 * r:.1f}%" for kid, r in zip(SPEC.kernels, ratios)))
    assert ratios == sorted(ratios)


@pytest.mark.parametrize("path", WRONG, ids=lambda p: p.stem)
def test_wrong_solution_gets_its_expected_status_and_points(path):
    kid = tracks.graded_kernel(path)
    result = grade(kid, path.read_text())
    problem = tracks.unmet_expectation(path, result["status"], result["score"]["total"])
    assert not problem, f"{problem}: {result['message']}"


def test_the_baseline_computes_the_product_of_k_major_inputs():
    """cuBLAS is handed B as the column-major view the kernels read: its product is A @ B (a layout mistake would
    give an error of order 1)."""
    import torch

    from graders.cuda_engine.problems import problem
    definition = problem("bf16gemm_kmajor")
    inputs = definition.make_inputs((256, 384, 512), torch.Generator(device="cuda").manual_seed(0))
    out = torch.full((256, 384), np.nan, device="cuda")
    definition.baseline(out, inputs)
    torch.cuda.synchronize()
    assert definition.accuracy(out, definition.reference(inputs))["frobenius_rel_error"] < 1e-2
