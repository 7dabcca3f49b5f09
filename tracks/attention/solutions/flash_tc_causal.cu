// Causal FlashAttention-2 on the tensor cores: the flash_tc kernel with PyTorch's causal mask (is_causal=True,
// aligned to the upper left: query row i sees keys j <= i). A block of TILE_Y rows stops after the key tile
// that holds its last row's diagonal, so the work is about half the unmasked kernel's; a warp skips the
// products of a tile that lies wholly after its 16 rows (the block's last tile, for its first warps), but not
// the block's barriers and copies.
// Only tiles that cross a warp's diagonal (or hold the end of seq_k) are masked element by element: a key
// j > row gets -inf. Every row sees key 0 in the first tile, so its max is finite from there on; a tile whose
// keys all lie after a row leaves that row's max (alpha = 1) and adds weights of 0.
// - Blocks run longest first across the whole grid: the blocks are numbered in launch order (x fastest) and
//   the first batch x heads of them take every head's last rows, the next ones the rows before, and so on;
//   the short blocks fill the end of the grid instead of a head's long block starting last.
// - The launch: 32 x 4 threads on TILE_Y = 64 rows, two blocks an SM (flash_tc's 32 x 8 on 128 rows, one
//   an SM, measured 9% slower here): a block's lone steps (staging Q, the first tile's wait, its masked last
//   tile, the write of O) overlap the other block's products, and a block ends at its own diagonal, 64 rows
//   at a time. On the H200 at the perf shape this kernel takes 0.57 x flash_tc's time (0.62 on 128 rows).
//   flash_tc itself gains nothing from it: at two blocks an SM its longer loop spills.
// Everything else (fragments, swizzle, pipeline, edges) is flash_tc's.
typedef unsigned short bf16;   // the raw bits of a bfloat16

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// 16 bytes global -> shared, bypassing registers; src_bytes = 0 writes 16 zero bytes instead
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :: "r"(smem_u32(dst)), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N_>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N_) : "memory"); }

// four 8 x 8 bf16 matrices; lanes 8i .. 8i + 7 give the row addresses of matrix i
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}

// d += a b: a 16 x 16 (row), b 16 x 8 (col), bf16; d 16 x 8, fp32
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// two floats rounded to bf16 (nearest even) in one register, lo in the low half
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi)
{
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ float exp2_approx(float x)   // 2^x on the SFU; 2^-inf = 0
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// one block's query rows at head_dim D: each head_dim compiles to its own loop, register arrays sized
// at compile time
template <int D>
__device__ __forceinline__ void attend(float* out, const bf16* q, const bf16* k, const bf16* v, int seq_q,
                                       int seq_k, bf16* smem)
{
    constexpr int KEYS = TILE_X, ROWS = TILE_Y, THREADS = BLOCK_X * BLOCK_Y;
    const float NEG_INF = __int_as_float(0xff800000);
    const int lane = threadIdx.x, warp = threadIdx.y, tid = warp * BLOCK_X + lane;
    const int g = lane / 4, t = lane % 4;   // a fragment's row (and row + 8) and column pair
    const int launch = blockIdx.y * gridDim.x + blockIdx.x, pairs = gridDim.y;   // (batch, head) pairs
    const int q0 = (gridDim.x - 1 - launch / pairs) * ROWS;   // the longest rows first, for every head
    const long long bh = launch % pairs;
    constexpr int CHUNKS = D / 8, KD = D / 16, NS = KEYS / 8, NO = D / 8;
    const bf16* qb = q + bh * seq_q * D;
    const bf16* kb = k + bh * seq_k * D;
    const bf16* vb = v + bh * seq_k * D;
    bf16* const q_s = smem;                                        // units 0 (and 1), before the loop
    bf16* const v_s = smem;                                        // unit 0
    auto k_s = [&](int j) { return smem + (j % 2 ? 1 : 2) * KEYS * D; };   // K(j): unit 2, 1, 2, ...
    auto at = [](int r, int c) { return r * D + (((c / 8) ^ (r % 8)) * 8) + c % 8; };   // swizzled

    auto load = [&](bf16* dst, const bf16* src, int rows, int first, int limit) {   // rows first ...
#pragma unroll
        for (int i = 0; i < rows * CHUNKS / THREADS; ++i) {   // rows * CHUNKS is a multiple of THREADS
            const int r = (tid + i * THREADS) / CHUNKS, c = (tid + i * THREADS) % CHUNKS * 8;
            const bool inside = first + r < limit;
            cp_async16(&dst[at(r, c)], src + (long long)(inside ? first + r : 0) * D + c, inside ? 16 : 0);
        }
    };

    load(q_s, qb, ROWS, q0, seq_q);
    load(k_s(0), kb, KEYS, 0, seq_k);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    unsigned qf[KD][4];   // this warp's 16 rows of Q as A fragments
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) ldmatrix_x4(qf[kk], &q_s[at(16 * warp + lane % 16, 16 * kk + (lane / 16) * 8)]);

    const float scale = 1.4426950408889634f * rsqrtf((float)D);   // log2(e) / sqrt(d)
    float o[NO][4], m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < NO; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

    const int k_end = min(seq_k, q0 + ROWS);   // keys after the block's last row are masked for all of it
    const int tiles = (k_end + KEYS - 1) / KEYS;
    const int first_row = q0 + 16 * warp, last_row = first_row + 15;   // this warp's rows
    for (int j = 0; j < tiles; ++j) {
        cp_async_wait<0>();   // K(j) has landed (this thread's part)
        __syncthreads();      // everyone's K(j); everyone is done with V(j - 1), K(j - 1) and Q's staging
        load(v_s, vb, KEYS, j * KEYS, seq_k);
        cp_async_commit();
        if (j + 1 < tiles) load(k_s(j + 1), kb, KEYS, (j + 1) * KEYS, seq_k);
        cp_async_commit();

        const bool seen = j * KEYS <= last_row;   // else every key of the tile lies after this warp's rows
        unsigned p[KEYS / 16][4];   // P as A fragments: keys 16c .. 16c + 15 are S's n-tiles 2c, 2c + 1
        if (seen) {
            const bf16* ks = k_s(j);
            float s[NS][4];
#pragma unroll
            for (int n = 0; n < NS; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KD; ++kk)
#pragma unroll
                for (int n = 0; n < NS; n += 2) {   // keys 8n .. 8n + 15: K rows, i.e. B columns
                    unsigned r[4];
                    ldmatrix_x4(r, &ks[at(8 * n + lane % 8 + (lane / 16) * 8, 16 * kk + ((lane / 8) % 2) * 8)]);
                    mma_bf16(s[n], qf[kk], r[0], r[1]);
                    mma_bf16(s[n + 1], qf[kk], r[2], r[3]);
                }
            if ((j + 1) * KEYS - 1 > first_row || (j + 1) * KEYS > seq_k) {   // the diagonal, or past seq_k
#pragma unroll
                for (int n = 0; n < NS; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int key = j * KEYS + 8 * n + 2 * t + e % 2, row = first_row + g + 8 * (e / 2);
                        if (key >= seq_k || key > row) s[n][e] = NEG_INF;
                    }
            }

            float top[2] = {m[0], m[1]};   // rows g and g + 8: e = 0, 1 and e = 2, 3
#pragma unroll
            for (int n = 0; n < NS; ++n) {
                top[0] = fmaxf(top[0], fmaxf(s[n][0], s[n][1]));
                top[1] = fmaxf(top[1], fmaxf(s[n][2], s[n][3]));
            }
            float alpha[2], shift[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                top[i] = fmaxf(top[i], __shfl_xor_sync(0xffffffffu, top[i], 1));   // the row's 4 lanes
                top[i] = fmaxf(top[i], __shfl_xor_sync(0xffffffffu, top[i], 2));
                alpha[i] = exp2_approx((m[i] - top[i]) * scale);   // 0 on the first tile (m = -inf)
                m[i] = top[i];                                     // finite: key j * KEYS is valid
                shift[i] = top[i] * scale;
                l[i] *= alpha[i];
            }
#pragma unroll
            for (int n = 0; n < NS; ++n) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    s[n][e] = exp2_approx(fmaf(s[n][e], scale, -shift[e / 2]));
                    l[e / 2] += s[n][e];
                }
                p[n / 2][2 * (n % 2)] = pack_bf16(s[n][0], s[n][1]);
                p[n / 2][2 * (n % 2) + 1] = pack_bf16(s[n][2], s[n][3]);
            }
#pragma unroll
            for (int n = 0; n < NO; ++n) {
                o[n][0] *= alpha[0];
                o[n][1] *= alpha[0];
                o[n][2] *= alpha[1];
                o[n][3] *= alpha[1];
            }
        }

        cp_async_wait<1>();   // V(j) has landed; K(j + 1) may still be in flight
        __syncthreads();
        if (seen) {
#pragma unroll
            for (int c = 0; c < KEYS / 16; ++c)
#pragma unroll
                for (int n = 0; n < NO; n += 2) {   // dims 8n .. 8n + 15
                    unsigned r[4];
                    ldmatrix_x4_trans(r, &v_s[at(16 * c + lane % 16, 8 * n + (lane / 16) * 8)]);
                    mma_bf16(o[n], p[c], r[0], r[1]);
                    mma_bf16(o[n + 1], p[c], r[2], r[3]);
                }
        }
    }

#pragma unroll
    for (int i = 0; i < 2; ++i) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
        const int row = q0 + 16 * warp + g + 8 * i;
        if (row < seq_q) {
            const float inv = 1.0f / l[i];
            float* dst = out + (bh * seq_q + row) * D + 2 * t;
#pragma unroll
            for (int n = 0; n < NO; ++n)
                *reinterpret_cast<float2*>(dst + 8 * n) = make_float2(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
        }
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y, 2)
flash_tc_causal(float* out, const bf16* q, const bf16* k, const bf16* v, int batch, int heads, int seq_q,
                int seq_k, int head_dim)
{
    constexpr int KEYS = TILE_X, ROWS = TILE_Y, MAX_D = 128;
    static_assert(BLOCK_X == 32 && ROWS == 16 * BLOCK_Y, "a warp per 16 query rows");
    static_assert(KEYS == 64 && (ROWS == KEYS || ROWS == 2 * KEYS), "Q is staged in one or two key-tile buffers");
    __shared__ __align__(128) bf16 smem[3 * KEYS * MAX_D];   // 48 KiB at head_dim 128

    if (head_dim == 128)
        attend<128>(out, q, k, v, seq_q, seq_k, smem);
    else if (head_dim == 64)
        attend<64>(out, q, k, v, seq_q, seq_k, smem);
}
