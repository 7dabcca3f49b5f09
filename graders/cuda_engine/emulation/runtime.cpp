// The CPU preview's launcher (graders/cuda_engine/preview.py): runs one kernel, compiled with cuda.h and linked
// with this file, once over its grid on one CPU thread, and reports what happened in a result file.
//
// Usage: runtime RESULT ORDER LAYOUT POISON CPU_SECONDS GRID_X GRID_Y GRID_Z BLOCK_X BLOCK_Y BLOCK_Z
//                NBUF (PATH ELEMENT_BYTES ELEMENTS)*NBUF NINT INT*
// ORDER: "forward" runs blocks, and a block's warps and lanes (see run_block), in increasing index; "reverse" in
// decreasing. LAYOUT: "end" puts each buffer's end against an inaccessible page (its start 16-byte aligned), "start"
// its start. POISON: the byte every `__shared__` byte holds when a block starts. Buffer 0 is the output: its body
// starts as NaN and is written to PATH after the launch; the others are inputs read from PATH, then made read-only.
// Every buffer lies between 16 MiB of inaccessible pages, and the bytes between it and them hold a fill pattern
// (0xFF, a NaN of every float format, in inputs; a canary in the output, checked after the launch).
//
// The result file holds "key value" lines: "status" is ok, fault (with access read|write|unknown, buffer, index,
// and wild 1 when the address is beyond the buffer's guard pages; buffer "shared", the byte offset from the start of
// the __shared__ variables and their size, for an access just outside them; buffer "none" where the address is
// unknown, a non-canonical one far from any buffer), stack (a thread's locals outgrew its stack),
// deadlock (with waiting: what the threads wait at), timeout, signal (with name), or arguments (the kernel takes
// another number of pointers or ints: pointers, ints). "block" and "thread" say where it happened.
#include "cuda.h"

#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>
#include <vector>

#if defined(__x86_64__) && defined(__linux__)
#define EMU_FAST_SWITCH 1
#endif

dim3 threadIdx, blockIdx, blockDim, gridDim;

extern "C" void emu_entry(void* const* pointers, const long long* ints);   // the kernel's translation unit
extern "C" void emu_signature(int* pointers, int* ints);
extern "C" char __start_emu_shared[] __attribute__((weak));
extern "C" char __stop_emu_shared[] __attribute__((weak));

namespace {

constexpr std::size_t GUARD = std::size_t(16) << 20;
constexpr rlim_t ADDRESS_SPACE = rlim_t(4) << 30;   // the memory cap: 4 GiB of address space
// preview.py links the section emu_shared inside [SHARED_LOW, SHARED_HIGH), where nothing else is mapped, flush
// against one end of it (the link's --section-start): an access just past the other end of the block's __shared__
// variables lands there too, in memory that is mapped only where the section's first or last page lies.
constexpr std::uintptr_t SHARED_LOW = 0x100000, SHARED_HIGH = 0x400000;
constexpr std::size_t STACK = std::size_t(256) << 10;
constexpr unsigned char INPUT_FILL = 0xff, CANARY = 0xa5;

int result_fd = -1;
std::size_t page = 4096;

// ---- reporting: async-signal-safe enough for a process about to _exit -----------------------------------------
char report_buffer[1024];
std::size_t report_length = 0;

void say(const char* key, const char* value)
{
    const int n = std::snprintf(report_buffer + report_length, sizeof report_buffer - report_length, "%s %s\n", key,
                                value);
    if (n > 0) report_length = std::min(sizeof report_buffer - 1, report_length + n);
}

void say_number(const char* key, long long value)
{
    char text[32];
    std::snprintf(text, sizeof text, "%lld", value);
    say(key, text);
}

void say_where()
{
    char text[64];
    std::snprintf(text, sizeof text, "%u %u %u", blockIdx.x, blockIdx.y, blockIdx.z);
    say("block", text);
    std::snprintf(text, sizeof text, "%u %u %u", threadIdx.x, threadIdx.y, threadIdx.z);
    say("thread", text);
}

[[noreturn]] void finish(int code)
{
    if (write(result_fd, report_buffer, report_length) < 0) code = 70;
    _exit(code);
}

// ---- buffers ---------------------------------------------------------------------------------------------------
struct Buffer {
    unsigned char* region;       // GUARD, the accessible pages, GUARD
    std::size_t region_bytes;
    unsigned char *low, *high;   // the accessible pages
    unsigned char* start;
    std::size_t bytes, element;
};
std::vector<Buffer> buffers;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

Buffer make_buffer(std::size_t element, std::size_t elements, bool at_end, unsigned char fill)
{
    Buffer b{};
    b.element = element;
    b.bytes = element * elements;
    const std::size_t span = round_up(std::max<std::size_t>(b.bytes, 1), 16), pages = round_up(span, page);
    b.region_bytes = 2 * GUARD + pages;
    void* region = mmap(nullptr, b.region_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (region == MAP_FAILED) { say("status", "memory"); finish(3); }
    b.region = static_cast<unsigned char*>(region);
    b.low = b.region + GUARD;
    b.high = b.low + pages;
    if (mprotect(b.low, pages, PROT_READ | PROT_WRITE) != 0) { say("status", "memory"); finish(3); }
    b.start = at_end ? b.high - span : b.low;
    std::memset(b.low, fill, pages);
    return b;
}

void read_file(const char* path, unsigned char* into, std::size_t bytes)
{
    const int fd = open(path, O_RDONLY);
    std::size_t done = 0;
    while (fd >= 0 && done < bytes) {
        const ssize_t n = read(fd, into + done, bytes - done);
        if (n <= 0) break;
        done += n;
    }
    if (fd >= 0) close(fd);
    if (done != bytes) { say("status", "input"); finish(3); }
}

void write_file(const char* path, const unsigned char* from, std::size_t bytes)
{
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::size_t done = 0;
    while (fd >= 0 && done < bytes) {
        const ssize_t n = write(fd, from + done, bytes - done);
        if (n <= 0) break;
        done += n;
    }
    if (fd >= 0) close(fd);
    if (done != bytes) { say("status", "output"); finish(3); }
}

// The output's first damaged canary after its end (or the nearest before its start), as an element index.
bool canary_damage(const Buffer& out, long long& index)
{
    const long long element = (long long)out.element;
    for (unsigned char* p = out.start + out.bytes; p < out.high; ++p)
        if (*p != CANARY) { index = (p - out.start) / element; return true; }
    for (unsigned char* p = out.start; p-- > out.low;)
        if (*p != CANARY) { index = -((out.start - p + element - 1) / element); return true; }
    return false;
}

// ---- fibers: one per CUDA thread of the block ------------------------------------------------------------------
enum class At : unsigned char { ready, block_barrier, warp_barrier, done };
struct Fiber {
    void* sp;
    At at;
    unsigned mask;   // at a warp barrier: the lanes it waits for
    int vote;        // at a block barrier: __syncthreads_count's predicate
#if !defined(EMU_FAST_SWITCH)
    ucontext_t context;
#endif
};
struct Warp { unsigned char slots[32][EMU_SLOT]; };

std::vector<Fiber> fibers;
std::vector<Warp> warps;
unsigned char* stacks = nullptr;
unsigned threads = 0, current = 0;
int block_votes = 0;
void* scheduler_sp = nullptr;
void* const* kernel_pointers;
const long long* kernel_ints;

}  // namespace

#if defined(EMU_FAST_SWITCH)
// Saves the callee-saved registers on the current stack, stores the stack pointer in *from, and resumes the
// stack `to` the same way: a fiber switch in a few instructions (swapcontext also makes a system call).
extern "C" void emu_switch(void** from, void* to);
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");
#endif

namespace {

#if !defined(EMU_FAST_SWITCH)
ucontext_t scheduler_context_storage;
#endif

void fiber_main();

void to_scheduler()
{
#if defined(EMU_FAST_SWITCH)
    emu_switch(&fibers[current].sp, scheduler_sp);
#else
    swapcontext(&fibers[current].context, &scheduler_context_storage);
#endif
}

void resume(unsigned t)
{
    current = t;
    const unsigned x = blockDim.x, y = blockDim.y;
    threadIdx = {t % x, t / x % y, t / (x * y)};
#if defined(EMU_FAST_SWITCH)
    emu_switch(&scheduler_sp, fibers[t].sp);
#else
    swapcontext(&scheduler_context_storage, &fibers[t].context);
#endif
}

void start_fiber(unsigned t)
{
    Fiber& f = fibers[t];
    f.at = At::ready;
    unsigned char* base = stacks + t * (STACK + page) + page;   // its guard page lies below
#if defined(EMU_FAST_SWITCH)
    auto** top = reinterpret_cast<void**>(base + STACK);
    top[-1] = nullptr;                                          // fiber_main's return address: never used
    top[-2] = reinterpret_cast<void*>(&fiber_main);             // where emu_switch's ret goes
    for (int i = 3; i <= 8; ++i) top[-i] = nullptr;             // the six callee-saved registers
    f.sp = top - 8;
#else
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = base;
    f.context.uc_stack.ss_size = STACK;
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_main, 0);
#endif
}

void fiber_main()
{
    emu_entry(kernel_pointers, kernel_ints);
    fibers[current].at = At::done;
    to_scheduler();
    __builtin_unreachable();
}

[[noreturn]] void deadlock()
{
    std::string waiting;
    for (unsigned t = 0; t < threads && waiting.size() < 200; ++t) {
        const unsigned x = blockDim.x, y = blockDim.y;
        char text[96];
        const At at = fibers[t].at;
        const char* what = at == At::block_barrier ? "__syncthreads" : at == At::warp_barrier ? "warp" : nullptr;
        if (!what) continue;
        std::snprintf(text, sizeof text, "%s%u,%u,%u:%s", waiting.empty() ? "" : ";", t % x, t / x % y, t / (x * y),
                      what);
        waiting += text;
    }
    say("status", "deadlock");
    say("waiting", waiting.c_str());
    threadIdx = {0, 0, 0};
    say_where();
    finish(4);
}

// Warp w's waiting lanes go on when every lane they wait for (not returned) waits too.
bool release_warp(unsigned w)
{
    const unsigned first = 32 * w, last = std::min(threads, first + 32);
    unsigned waiting = 0, wanted = 0;
    for (unsigned t = first; t < last; ++t)
        if (fibers[t].at == At::warp_barrier) { waiting |= 1u << (t - first); wanted |= fibers[t].mask; }
    for (unsigned t = first; t < last; ++t)
        if (fibers[t].at == At::done) wanted &= ~(1u << (t - first));
    if (last - first < 32) wanted &= (1u << (last - first)) - 1;
    if (!waiting || (wanted & ~waiting) != 0) return false;
    for (unsigned t = first; t < last; ++t)
        if (fibers[t].at == At::warp_barrier) fibers[t].at = At::ready;
    return true;
}

// Between two __syncthreads, each warp in turn runs as far as it can: its lanes one at a time, meeting at its own
// warp-level calls, until every lane waits at __syncthreads or has returned. So one warp runs ahead of the others
// as far as the code lets it, and the lanes of a warp ahead of each other between warp-level calls.
void run_block(bool reverse)
{
    for (unsigned t = 0; t < threads; ++t) start_fiber(t);
    const unsigned nwarps = (threads + 31) / 32;
    for (;;) {
        for (unsigned i = 0; i < nwarps; ++i) {
            const unsigned w = reverse ? nwarps - 1 - i : i, first = 32 * w, last = std::min(threads, first + 32);
            do {
                for (unsigned j = first; j < last; ++j) {
                    const unsigned t = reverse ? first + last - 1 - j : j;
                    if (fibers[t].at == At::ready) resume(t);
                }
            } while (release_warp(w));
        }
        bool all_done = true, all_at_barrier = true;
        int votes = 0;
        for (unsigned t = 0; t < threads; ++t) {
            all_done &= fibers[t].at == At::done;
            all_at_barrier &= fibers[t].at == At::done || fibers[t].at == At::block_barrier;
            if (fibers[t].at == At::block_barrier) votes += fibers[t].vote != 0;
        }
        if (all_done) return;
        if (!all_at_barrier) deadlock();
        block_votes = votes;
        for (unsigned t = 0; t < threads; ++t)
            if (fibers[t].at == At::block_barrier) fibers[t].at = At::ready;
    }
}

// ---- signals ---------------------------------------------------------------------------------------------------
void on_fault(int signal, siginfo_t* info, void* context)
{
    const auto address = reinterpret_cast<unsigned char*>(info->si_addr);
    const char* access = "unknown";
#if defined(__x86_64__) && defined(__linux__)
    if (signal == SIGSEGV)   // the page fault's error code: bit 1 for a write
        access = (static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) ? "write" : "read";
#else
    (void)context;
#endif
    if (stacks && address >= stacks && address < stacks + threads * (STACK + page)
        && (std::size_t)(address - stacks) % (STACK + page) < page) {
        say("status", "stack");
        say_where();
        finish(5);
    }
    const std::uintptr_t at = (std::uintptr_t)address;
    if ((signal == SIGSEGV || signal == SIGBUS) && at >= SHARED_LOW && at < SHARED_HIGH) {
        say("status", "fault");
        say("access", access);
        say("buffer", "shared");
        say_number("index", (long long)(address - reinterpret_cast<unsigned char*>(__start_emu_shared)));
        say_number("size", (long long)(__stop_emu_shared - __start_emu_shared));
        say_where();
        finish(6);
    }
    if (signal == SIGSEGV && info->si_code == SI_KERNEL) {   // a general-protection fault: no address is known
        say("status", "fault");
        say("access", "unknown");
        say("buffer", "none");
        say_where();
        finish(6);
    }
    if (signal == SIGSEGV || signal == SIGBUS) {
        long long best = -1;
        unsigned long long distance = ~0ull;
        for (std::size_t i = 0; i < buffers.size(); ++i) {
            const Buffer& b = buffers[i];
            if (address >= b.region && address < b.region + b.region_bytes) { best = i; distance = 0; break; }
            const unsigned long long d = address < b.region ? b.region - address
                                                             : address - (b.region + b.region_bytes);
            if (d < distance) { distance = d; best = i; }
        }
        if (best >= 0) {
            const Buffer& b = buffers[best];
            const long long offset = (long long)(address - b.start), element = (long long)b.element;
            say("status", "fault");
            say("access", access);
            say_number("buffer", best);
            say_number("index", offset >= 0 ? offset / element : -((-offset + element - 1) / element));
            if (distance) say_number("wild", 1);
            say_where();
            finish(6);
        }
    }
    say("status", "signal");
    say("name", signal == SIGFPE ? "SIGFPE" : signal == SIGILL ? "SIGILL" : signal == SIGABRT ? "SIGABRT"
                : signal == SIGBUS ? "SIGBUS" : signal == SIGTRAP ? "SIGTRAP" : "SIGSEGV");
    say_where();
    finish(7);
}

void on_alarm(int)
{
    say("status", "timeout");
    say_where();
    finish(8);
}

void install_handlers(unsigned seconds)
{
    static unsigned char alternate[1 << 16];
    stack_t stack{};
    stack.ss_sp = alternate;
    stack.ss_size = sizeof alternate;
    sigaltstack(&stack, nullptr);
    struct sigaction action{};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP}) sigaction(s, &action, nullptr);
    struct sigaction alarm{};
    alarm.sa_handler = on_alarm;
    alarm.sa_flags = SA_ONSTACK;
    sigemptyset(&alarm.sa_mask);
    sigaction(SIGPROF, &alarm, nullptr);
    itimerval timer{};   // CPU time, so that a busy machine does not stop a kernel that is only slow
    timer.it_value.tv_sec = seconds;
    setitimer(ITIMER_PROF, &timer, nullptr);
}

}  // namespace

// ---- what cuda.h declares --------------------------------------------------------------------------------------
void __syncthreads()
{
    fibers[current].at = At::block_barrier;
    fibers[current].vote = 0;
    to_scheduler();
}

static int vote(int predicate)
{
    fibers[current].at = At::block_barrier;
    fibers[current].vote = predicate;
    to_scheduler();
    return block_votes;
}

int __syncthreads_count(int predicate) { return vote(predicate); }
int __syncthreads_and(int predicate)
{
    unsigned alive = 0;
    for (unsigned t = 0; t < threads; ++t) alive += fibers[t].at != At::done;
    return vote(!predicate) == 0 && alive > 0;
}
int __syncthreads_or(int predicate) { return vote(predicate) != 0; }

unsigned emu_lane() { return current % 32; }

static void warp_barrier(unsigned mask)
{
    fibers[current].at = At::warp_barrier;
    fibers[current].mask = mask | 1u << (current % 32);
    to_scheduler();
}

void __syncwarp(unsigned mask) { warp_barrier(mask); }

void emu_warp_exchange(unsigned mask, const void* mine, std::size_t size, void (*gather)(EmuSlots, void*),
                       void* context)
{
    Warp& warp = warps[current / 32];
    std::memcpy(warp.slots[current % 32], mine, size);
    warp_barrier(mask);
    gather(warp.slots, context);
    warp_barrier(mask);
}

unsigned __ballot_sync(unsigned mask, int predicate)
{
    const int mine = predicate != 0;
    struct Ask { unsigned mask, bits; } ask{mask, 0};
    emu_warp_exchange(mask, &mine, sizeof mine, [](EmuSlots slots, void* context) {
        Ask& a = *static_cast<Ask*>(context);
        const unsigned first = current / 32 * 32;
        for (unsigned lane = 0; lane < 32 && first + lane < threads; ++lane) {
            int vote;
            std::memcpy(&vote, slots[lane], sizeof vote);
            if ((a.mask >> lane & 1u) && fibers[first + lane].at != At::done && vote) a.bits |= 1u << lane;
        }
    }, &ask);
    return ask.bits;
}

unsigned __activemask()
{
    const unsigned first = current / 32 * 32;
    unsigned mask = 0;
    for (unsigned lane = 0; lane < 32 && first + lane < threads; ++lane)
        if (fibers[first + lane].at != At::done) mask |= 1u << lane;
    return mask;
}

long long clock64()
{
    static long long ticks = 0;
    return ticks += 16;
}

// ---- the launch ------------------------------------------------------------------------------------------------
int main(int argc, char** argv)
{
    page = (std::size_t)sysconf(_SC_PAGESIZE);
    const rlimit cap{ADDRESS_SPACE, ADDRESS_SPACE}, no_core{0, 0};
    setrlimit(RLIMIT_AS, &cap);
    setrlimit(RLIMIT_CORE, &no_core);
    if (argc < 13) return 2;
    result_fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (result_fd < 0) return 2;
    const bool reverse = std::strcmp(argv[2], "reverse") == 0, at_end = std::strcmp(argv[3], "end") == 0;
    const unsigned char poison = (unsigned char)std::atoi(argv[4]);
    install_handlers((unsigned)std::atoi(argv[5]));
    gridDim = {(unsigned)std::atol(argv[6]), (unsigned)std::atol(argv[7]), (unsigned)std::atol(argv[8])};
    blockDim = {(unsigned)std::atol(argv[9]), (unsigned)std::atol(argv[10]), (unsigned)std::atol(argv[11])};
    int arg = 12;
    const int nbuf = std::atoi(argv[arg++]);
    const char* output_path = argv[arg];
    if (nbuf < 1 || argc < arg + 3 * nbuf + 1) return 2;
    std::vector<void*> pointers;
    for (int i = 0; i < nbuf; ++i, arg += 3) {
        const std::size_t element = std::strtoull(argv[arg + 1], nullptr, 10);
        const std::size_t elements = std::strtoull(argv[arg + 2], nullptr, 10);
        buffers.push_back(make_buffer(element, elements, at_end, i == 0 ? CANARY : INPUT_FILL));
        Buffer& b = buffers.back();
        if (i == 0) std::memset(b.start, 0xff, b.bytes);
        else {
            read_file(argv[arg], b.start, b.bytes);
            mprotect(b.low, b.high - b.low, PROT_READ);
        }
        pointers.push_back(b.start);
    }
    const int nint = std::atoi(argv[arg++]);
    std::vector<long long> ints;
    for (int i = 0; i < nint && arg < argc; ++i) ints.push_back(std::atoll(argv[arg++]));
    int want_pointers = 0, want_ints = 0;
    emu_signature(&want_pointers, &want_ints);
    if (want_pointers != nbuf || want_ints != nint) {
        say("status", "arguments");
        say_number("pointers", want_pointers);
        say_number("ints", want_ints);
        finish(9);
    }
    kernel_pointers = pointers.data();
    kernel_ints = ints.data();

    threads = blockDim.x * blockDim.y * blockDim.z;
    fibers.assign(threads, Fiber{});
    warps.assign((threads + 31) / 32, Warp{});
    const std::size_t stack_bytes = threads * (STACK + page);
    void* region = mmap(nullptr, stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                        0);
    if (region == MAP_FAILED) { say("status", "memory"); finish(3); }
    stacks = static_cast<unsigned char*>(region);
    for (unsigned t = 0; t < threads; ++t) mprotect(stacks + t * (STACK + page), page, PROT_NONE);

    const unsigned long long blocks = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
    for (unsigned long long i = 0; i < blocks; ++i) {
        const unsigned long long b = reverse ? blocks - 1 - i : i;
        const unsigned long long plane = (unsigned long long)gridDim.x * gridDim.y;
        blockIdx = {(unsigned)(b % gridDim.x), (unsigned)(b / gridDim.x % gridDim.y), (unsigned)(b / plane)};
        if (__start_emu_shared != __stop_emu_shared)
            std::memset(__start_emu_shared, poison, __stop_emu_shared - __start_emu_shared);
        run_block(reverse);
    }
    threadIdx = {0, 0, 0};
    long long index;
    if (canary_damage(buffers[0], index)) {
        say("status", "fault");
        say("access", "write");
        say_number("buffer", 0);
        say_number("index", index);
        finish(6);
    }
    write_file(output_path, buffers[0].start, buffers[0].bytes);
    say("status", "ok");
    finish(0);
}
