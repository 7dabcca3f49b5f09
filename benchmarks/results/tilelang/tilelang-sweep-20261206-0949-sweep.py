"""Times TileLang variants (mm_*.py: matmul_fp16 at 4096^3 against torch.matmul; sm_*.py: softmax at 32768x8192
against a device copy), each checked against torch first. Usage: python3 .sweep/sweep.py [FILE...]"""
import glob, sys, statistics, time
sys.path.insert(0, ".")
import torch, tilelang
from graders.tilelang_engine.child import build

def timed(fn, reps=30):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)

major, minor = torch.cuda.get_device_capability()
arch = f"sm_{major}{minor}a"
print(torch.cuda.get_device_name(), arch, "tilelang", tilelang.__version__, flush=True)
torch.manual_seed(0)
M = N = K = 4096
a = torch.randn(M, K, device="cuda", dtype=torch.float16); b = torch.randn(K, N, device="cuda", dtype=torch.float16)
c = torch.empty(M, N, device="cuda", dtype=torch.float16)
x = torch.randn(32768, 8192, device="cuda") * 100; y = torch.empty_like(x)
base_mm = timed(lambda: torch.matmul(a, b, out=c)); base_cp = timed(lambda: y.copy_(x))
print(f"cuBLAS fp16 {base_mm:.4f} ms ({2*M*N*K/base_mm/1e9:.0f} TFLOP/s); copy {base_cp:.4f} ms", flush=True)
for path in sys.argv[1:] or sorted(glob.glob(".sweep/mm_*.py")) + sorted(glob.glob(".sweep/sm_*.py")):
    fn = "matmul_fp16" if "/mm_" in path else "softmax"
    t0 = time.time()
    try:
        kernel = tilelang.compile(build(open(path).read(), fn), target={"kind": "cuda", "arch": arch})
    except Exception as exc:
        print(f"{path}: build failed: {type(exc).__name__}: {str(exc)[-300:]}", flush=True); continue
    took = time.time() - t0
    try:
        if fn == "matmul_fp16":
            for (m, n, k) in [] if "static" in path else [(513, 1032, 4104), (17, 40, 72)]:
                aa = torch.randn(m, k, device="cuda", dtype=torch.float16); bb = torch.randn(k, n, device="cuda", dtype=torch.float16)
                out = torch.empty(m, n, device="cuda", dtype=torch.float16); kernel(out, aa, bb)
                err = (out.float() - aa.float() @ bb.float()).abs().max().item()
                assert err < 0.05 * (k ** 0.5), (m, n, k, err)
            ms = timed(lambda: kernel(c, a, b)); ratio = base_mm / ms
            print(f"{path}: {ms:.4f} ms {2*M*N*K/ms/1e9:.0f} TFLOP/s ratio {ratio:.3f} (compile {took:.0f} s)", flush=True)
        else:
            for (r, cc) in [(1, 1), (7, 1025), (5, 4097), (3, 9000), (2, 8192)]:
                xx = torch.randn(r, cc, device="cuda") * 100; out = torch.empty_like(xx); kernel(out, xx)
                torch.testing.assert_close(out, torch.softmax(xx, 1), rtol=2e-5, atol=1e-6)
            ms = timed(lambda: kernel(y, x)); ratio = base_cp / ms
            print(f"{path}: {ms:.4f} ms ratio to copy {ratio:.3f} (compile {took:.0f} s)", flush=True)
    except Exception as exc:
        print(f"{path}: FAILED {type(exc).__name__}: {str(exc)[-300:]}", flush=True)
