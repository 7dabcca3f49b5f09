// Runs one GEMM kernel (compiled in with -include cuda_emu.h, -DKERNEL=<name> and the geometry defines)
// on random inputs under the CPU emulation, with C poisoned with NaN and fenced by canaries, and prints
// "ok <relative Frobenius error>" or "fail <why>". Usage: gemm_driver M N K
#include <cstdio>
#include <cstdlib>
#include <random>

extern "C" void KERNEL(float* C, const float* A, const float* B, int M, int N, int K);

int main(int argc, char** argv)
{
    const int M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]);
    std::mt19937 rng(M * 7919 + N * 104729 + K);
    std::normal_distribution<float> normal;
    std::vector<float> A((size_t)M * K), B((size_t)K * N);
    for (auto& v : A) v = normal(rng);
    for (auto& v : B) v = normal(rng);
    const size_t guard = 4096;
    std::vector<float> buffer((size_t)M * N + 2 * guard, NAN);
    const float canary = 12345.0f;
    for (size_t i = 0; i < guard; ++i) buffer[i] = buffer[buffer.size() - 1 - i] = canary;
    float* C = buffer.data() + guard;
    dim3 grid{(unsigned)((N + TILE_X - 1) / TILE_X), (unsigned)((M + TILE_Y - 1) / TILE_Y), 1};
    emu_launch(grid, dim3{BLOCK_X, BLOCK_Y, 1}, [&] { KERNEL(C, A.data(), B.data(), M, N, K); });
    for (size_t i = 0; i < guard; ++i)
        if (buffer[i] != canary || buffer[buffer.size() - 1 - i] != canary) { std::printf("fail oob_write\n"); return 1; }
    double err = 0, norm = 0;
    long bad = 0;
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            double c = 0, mag = 0;
            for (int k = 0; k < K; ++k) {
                c += (double)A[(size_t)i * K + k] * B[(size_t)k * N + j];
                mag += std::fabs((double)A[(size_t)i * K + k] * B[(size_t)k * N + j]);
            }
            const double got = C[(size_t)i * N + j];
            if (!(std::fabs(got - c) <= 1e-3 * mag + 1e-30)) {
                if (!bad) std::printf("first bad C[%d][%d]: expected %g got %g\n", i, j, c, got);
                ++bad;
            }
            err += (got - c) * (got - c);
            norm += c * c;
        }
    const double frob = std::sqrt(err / (norm > 0 ? norm : 1));
    if (bad || !(frob <= 1e-4)) { std::printf("fail %ld bad, frob %g\n", bad, frob); return 1; }
    std::printf("ok %g\n", frob);
    return 0;
}
