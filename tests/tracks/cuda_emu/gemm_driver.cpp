// Runs one GEMM kernel (compiled with -include cuda_emu.h and the geometry defines; called here as KERNEL,
// bound to the kernel's name at link time by tests/tracks/emu_build.py) once under the CPU emulation, on
// buffers the test wrote to files, and writes C's buffer back: the test made the inputs, the poison and the
// guards, and judges the result with the grader's own checks.
// Usage: gemm_driver GRID_X GRID_Y BLOCK_X BLOCK_Y M N K C.bin C_OFFSET A.bin A_OFFSET B.bin B_OFFSET
// Each file holds a whole float32 buffer (guards included); OFFSET is where the matrix starts in it.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

extern "C" void KERNEL(float* C, const float* A, const float* B, int M, int N, int K);

static std::vector<float> load(const char* path)
{
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    std::vector<float> buffer(file.tellg() / sizeof(float));
    file.seekg(0);
    file.read(reinterpret_cast<char*>(buffer.data()), buffer.size() * sizeof(float));
    return buffer;
}

int main(int argc, char** argv)
{
    if (argc != 14) { std::fprintf(stderr, "usage: see gemm_driver.cpp\n"); return 2; }
    auto arg = [&](int i) { return std::atol(argv[i]); };
    const dim3 grid{(unsigned)arg(1), (unsigned)arg(2), 1}, block{(unsigned)arg(3), (unsigned)arg(4), 1};
    const int M = arg(5), N = arg(6), K = arg(7);
    std::vector<float> C = load(argv[8]), A = load(argv[10]), B = load(argv[12]);
    emu_launch(grid, block, [&] { KERNEL(C.data() + arg(9), A.data() + arg(11), B.data() + arg(13), M, N, K); });
    std::ofstream(argv[8], std::ios::binary).write(reinterpret_cast<const char*>(C.data()), C.size() * sizeof(float));
    return 0;
}
