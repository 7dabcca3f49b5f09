// expect: naive_score=0
// status: timeout
// Never finishes: clock64() is re-read on every pass, so the compiler must keep the loop, which never ends.
extern "C" __global__ void transpose_naive(float* out, const float* in, int rows, int cols)
{
    long long start = clock64();
    while (clock64() >= start) { }
}
