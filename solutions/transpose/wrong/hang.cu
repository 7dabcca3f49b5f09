// kernel: naive
// expect: timeout
// Never finishes: spins on a volatile flag that nothing clears.
extern "C" __global__ void transpose_naive(float* out, const float* in, int rows, int cols)
{
    volatile int spin = 1;
    while (spin) { }
}
