// Runs one attention-track kernel (compiled with -include cuda_emu.h and the geometry defines; called here as
// KERNEL, bound to the kernel's name at link time by tests/tracks/emu_build.py, with the arguments of
// -DKIND_<kind>) once under the CPU emulation, on buffers the test wrote to files, and writes the output's
// buffer back; the test made the inputs, the poison and the guards, and judges the result.
// Usage: attention_driver GRID_X GRID_Y BLOCK_X BLOCK_Y NPTR (FILE OFFSET_BYTES)*NPTR INT...
// Each file holds a whole buffer (guards included); the first is the output, written back.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

using u16 = unsigned short;
#if defined(KIND_SOFTMAX)
extern "C" void KERNEL(float* out, const float* x, int rows, int cols);
#define CALL KERNEL((float*)p[0], (const float*)p[1], n[0], n[1])
#elif defined(KIND_FORWARD)
extern "C" void KERNEL(float* out, const u16* q, const u16* k, const u16* v, int batch, int heads, int seq_q,
                       int seq_k, int head_dim);
#define CALL KERNEL((float*)p[0], (const u16*)p[1], (const u16*)p[2], (const u16*)p[3], n[0], n[1], n[2], n[3], n[4])
#elif defined(KIND_DECODE)
extern "C" void KERNEL(float* out, const u16* q, const u16* k, const u16* v, int batch, int heads, int seq_k,
                       int head_dim);
#define CALL KERNEL((float*)p[0], (const u16*)p[1], (const u16*)p[2], (const u16*)p[3], n[0], n[1], n[2], n[3])
#endif

static std::vector<unsigned char> load(const char* path)
{
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    std::vector<unsigned char> buffer(file.tellg());
    file.seekg(0);
    file.read(reinterpret_cast<char*>(buffer.data()), buffer.size());
    return buffer;
}

int main(int argc, char** argv)
{
    auto arg = [&](int i) { return std::atol(argv[i]); };
    const dim3 grid{(unsigned)arg(1), (unsigned)arg(2), 1}, block{(unsigned)arg(3), (unsigned)arg(4), 1};
    const int pointers = arg(5);
    std::vector<std::vector<unsigned char>> buffers;
    std::vector<unsigned char*> p;
    for (int i = 0; i < pointers; ++i) buffers.push_back(load(argv[6 + 2 * i]));
    for (int i = 0; i < pointers; ++i) p.push_back(buffers[i].data() + arg(7 + 2 * i));
    std::vector<int> n;
    for (int i = 6 + 2 * pointers; i < argc; ++i) n.push_back(arg(i));
    emu_launch(grid, block, [&] { CALL; });
    std::ofstream(argv[6], std::ios::binary).write(reinterpret_cast<const char*>(buffers[0].data()), buffers[0].size());
    return 0;
}
