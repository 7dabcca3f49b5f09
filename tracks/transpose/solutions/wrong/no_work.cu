// expect: naive_score=0
// status: incorrect
// Launches, returns at once, writes nothing: the poisoned (NaN) output stays as it was.
extern "C" __global__ void transpose_naive(float* out, const float* in, int rows, int cols)
{
}
