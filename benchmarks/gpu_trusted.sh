#!/usr/bin/env bash
# Trusted grading on a GPU worker, in stages that each fit one 10-minute device call:
#   bash benchmarks/gpu_trusted.sh cases       # the sandbox's tests, the attack suite, nbgrader autograde of the
#                                              # puzzles (reference, stub, every known mistake)
#   bash benchmarks/gpu_trusted.sh sandbox     # the allowlist sandbox on the worker's own layout: its tests (CPU
#                                              # and GPU children), the include attack through nbgrader (vecadd)
#   bash benchmarks/gpu_trusted.sh dsl-attacks # a Triton notebook attacking the Python-DSL engine (a forged result,
#                                              # host Python in a kernel, an import of the reference) through one
#                                              # nbgrader autograde between two honest students
#   bash benchmarks/gpu_trusted.sh tools       # what a CUDA kernel's grade rests on besides its checks: timing
#                                              # integrity (cheating kernels), compute-sanitizer, ncu counters
#   bash benchmarks/gpu_trusted.sh candidates CASE... # benchmarks/candidates.py, each case graded twice (timing only),
#                                              # the log as <track>-sweep-<date>.log of the first case's track; a
#                                              # candidate's file travels in the call's carry
#   bash benchmarks/gpu_trusted.sh regrade TRACK...   # benchmarks/regrade_spread.py for each TRACK (5 regrades of
#                                              # every reference, 2 s budget), gemm in two halves; the records
#                                              # feed `workshop targets TRACK RECORD --fraction 0.97 --write`
#   bash benchmarks/gpu_trusted.sh timing [TRACK...]   # benchmarks/grading_time.py: nbgrader autograde of each
#                                              # track's reference and stub at the spec's budget, with every
#                                              # kernel's phases; tracks spread over the machine's GPUs, in parallel;
#                                              # TIMING_SUBMISSIONS="reference reference stub": a second reference
#                                              # too (the worker's caches warm, as for a class's later submissions);
#                                              # TIMING_PROFILE=1: the last one again under cProfile
#   bash benchmarks/gpu_trusted.sh puzzle-cost [ARGS...]  # benchmarks/puzzle_run_cost.py (ARGS: --puzzles map
#                                              # shared --repeats 3): a puzzle's GPU run, sanitizer runs, simulator,
#                                              # alone and side by side, and one GPU run's split
#   bash benchmarks/gpu_trusted.sh sanitizer-cost [ARGS...]  # benchmarks/sanitizer_cost.py (ARGS: --track gemm
#                                              # --kernels naive warptiling ...): each piece of a kernel's
#                                              # compute-sanitizer time, the tools alone, together, 4 kernels at once
#   bash benchmarks/gpu_trusted.sh regrade-parallel TRACK...   # regrade_spread of each TRACK whole (5 regrades,
#                                              # 2 s budget), each TRACK on its own GPU, in parallel (a 4-GPU machine
#                                              # measures four tracks in one call)
#   bash benchmarks/gpu_trusted.sh fleet4      # fleet_throughput on gemm: 1 GPU worker, then one per GPU (the mix
#                                              # of references, known-wrong and stubs), projected to a class of 200
#   bash benchmarks/gpu_trusted.sh fleet       # benchmarks/fleet_throughput.py: one GPU worker grading gemm
#                                              # submissions, then 1 and 2 simulator workers on the puzzles;
#                                              # redis-server from Debian's .debs carried in .debs (below), the
#                                              # course's SQLite gradebook; .whl built with the fleet's packages:
#                                              # ../shared/device/wheels.sh "celery[redis]==5.7.0" redis==8.1.0 rich==15.0.0 \
#                                              #   pytest-xdist==3.8.0 (every stage: pytest's addopts name -n)
#   bash benchmarks/gpu_trusted.sh grading TRACK [PYTEST_ARGS...]   # tests/gpu/test_TRACK_gpu.py: every reference
#                                              # and known-wrong solution through grade_kernel, the track's table
#                                              # and record (tensorcores and attention each take about 6-7
#                                              # minutes); PYTEST_ARGS select a part (-k autograde)
#   bash benchmarks/gpu_trusted.sh grading-parallel TRACK...   # the `grading` stage of each TRACK, each on its own
#                                              # GPU, in parallel (a 4-GPU machine runs four tracks' GPU tests in
#                                              # one call; a GPU's tracks one after another)
#   bash benchmarks/gpu_trusted.sh first-runs TRACK...   # tests/gpu/test_TRACK_gpu.py of each TRACK side by side
#                                              # on the one GPU: correctness and points of kernels never run before,
#                                              # in one call; their timings share the GPU, so only the logs and
#                                              # the nbgrader runs' records (seconds, points) come back
#                                              # (`grading` measures the rest);
#                                              # each stops after FIRST_RUN_LIMIT_S seconds (default 560)
#   bash benchmarks/gpu_trusted.sh call-split [TRACK [PROBLEM...]]   # benchmarks/model_call_split.py: a model
#                                              # problem's timed call split into host work and kernels, for eager,
#                                              # torch.compile and the reference ModelNew (default kernelbench);
#                                              # CANDIDATES="relu:PATH ..." measures staff-written ModelNews beside it
#   bash benchmarks/gpu_trusted.sh profile TRACK SHAPE KERNEL...   # ncu's speed-of-light, memory, occupancy,
#                                              # scheduler and warp-stall sections of TRACK's references at SHAPE
#                                              # (e.g. 4x16x4096x4096x128) and of the library call each is timed
#                                              # against; profiles kernels named like NCU_KERNELS (a regex)
#   NCU_KERNELS=REGEX bash benchmarks/gpu_trusted.sh profile-cases SHAPE CASE...   # the same sections of candidate
#                                              # kernels (benchmarks/candidates.py's CASEs, e.g. nvfp4:registers:
#                                              # .sweep/k.cu;tile=[512, 16]), each launched once at SHAPE
#   bash benchmarks/gpu_trusted.sh TRACK [K]   # a CUDA track (transpose, gemm, vecadd...) through nbgrader:
#                                              # reference, stub, every known-wrong solution (transpose also: a
#                                              # correct-but-slow submission and the score/timer forger); K, a
#                                              # pytest -k expression, selects a part ("known_wrong")
#   bash benchmarks/gpu_trusted.sh pack        # every file in $OUT into one $OUT/results-<date-time>.tgz: a device
#                                              # call brings back at most 8 files, and a call of several stages
#                                              # writes more (run it last; unpack the tarball into benchmarks/results)
# Run from the repo root after `source .whl/prelude.sh`. On the lent H200 bubblewrap is an unpacked .deb:
# carry `.debs` (made here with `apt-get download bubblewrap`, and for `fleet` also
# `apt-get download redis-server redis-tools libjemalloc2 liblzf1`) and this script unpacks it.
# Records land in benchmarks/results/<track>/ (platform/ for the sandbox, tools and fleet stages), their logs
# beside them (<name>-<date>-<hour><minute>.log); with $OUT set (a device run) the logs go to $OUT, and the
# records are copied there too.
# STAGE_LIMIT_S=N stops each stage (each run of a stage that runs several) after N seconds instead of its own limit.
# Bound a stage that way, never by wrapping this script in `timeout`: that stops the script, not its pytest, which
# runs on beside the next command and shares the GPU with it.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-}"
if ! command -v bwrap >/dev/null && [ -z "${WORKSHOP_BWRAP:-}" ]; then
  dpkg -x .debs/bubblewrap_*.deb /tmp/bw && export WORKSHOP_BWRAP=/tmp/bw/usr/bin/bwrap
fi
# wheels installed with `pip --target DIR` (the device's prelude) keep nbconvert's templates in DIR/share/jupyter,
# which is not on Jupyter's data path: without it `nbgrader generate_feedback` finds no template
for site in ${PYTHONPATH:+${PYTHONPATH//:/ }}; do
  [ -d "$site/share/jupyter" ] && export JUPYTER_PATH="$site/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"
done
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 OUT
rc=0
started=$(mktemp)   # records newer than this are this run's
trap 'rm -f "$started"' EXIT
logfile() {   # folder, name: the path of a new log of that results folder's (in $OUT when set)
  local dir=${OUT:-benchmarks/results/$1}
  mkdir -p "$dir" && echo "$dir/$2-$(date +%Y%m%d-%H%M).log"
}
run() {   # folder, name, timeout, pytest arguments...
  local log; log=$(logfile "$1" "$2")
  local name=$2 limit=${STAGE_LIMIT_S:-$3}; shift 3
  timeout "$limit" python3 -m pytest -q -s -p no:cacheprovider "$@" > "$log" 2>&1 || rc=1
  echo "[gpu_trusted] $name: $(tail -1 "$log")"
}
gpu_count() { local n; n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); echo "${n:-1}" | sed 's/^0$/1/'; }
redis_from_debs() {   # redis-server and redis-cli from the carried .debs, their libraries for them alone
  mkdir -p /tmp/redis/bin
  for deb in .debs/redis-*.deb .debs/libjemalloc2_*.deb .debs/liblzf1_*.deb; do dpkg -x "$deb" /tmp/redis; done
  for tool in redis-server redis-cli; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/redis/usr/lib/x86_64-linux-gnu exec /tmp/redis/usr/bin/%s "$@"\n' \
      "$tool" > "/tmp/redis/bin/$tool"
    chmod +x "/tmp/redis/bin/$tool"
  done
  export PATH="/tmp/redis/bin:$PATH"
}
case "${1:-cases}" in
  cases)
    run platform sandbox-and-attacks-gpu 170 tests/engines/test_sandbox.py tests/e2e/test_attacks.py
    run puzzles puzzles-nbgrader-gpu 170 -m gpu tests/gpu/test_puzzles_gpu.py ;;
  sandbox)
    run platform sandbox-tests-gpu 150 -n 0 tests/engines/test_sandbox.py
    run platform sandbox-include-attack-gpu 300 -n 0 -m gpu tests/gpu/test_sandbox_gpu.py ;;
  dsl-attacks)
    run triton triton-attacks-nbgrader-gpu 450 -n 0 -m gpu tests/gpu/test_triton_attacks_gpu.py ;;
  tools)
    run platform tools-gpu 560 -m gpu tests/gpu/test_timing_integrity_gpu.py tests/gpu/test_sanitizer_gpu.py \
      tests/gpu/test_counters_gpu.py ;;
  candidates)
    shift
    [ $# -gt 0 ] || { echo "usage: $0 candidates TRACK:KERNEL[:FILE][;KEY=VALUE]..." >&2; exit 2; }
    track=${1%%:*} && log=$(logfile "$track" "$track-sweep")
    WORKSHOP_SANDBOX=off timeout "${STAGE_LIMIT_S:-300}" python3 -m benchmarks.candidates --repeat 2 "$@" > "$log" 2>&1 \
      || rc=1
    sed 's/^/[gpu_trusted] /' "$log"
    exit $rc ;;
  regrade)
    shift
    for track in "$@"; do
      kernels=$(python3 -c "from graders.cuda_engine.spec import load_spec; print(' '.join(load_spec('$track').kernels))")
      set -- $kernels
      half=$(( ($# + 1) / 2 ))
      for part in "${*:1:$half}" "${*:$((half + 1))}"; do
        [ -n "$part" ] || continue
        log=$(logfile "$track" "regrade-$track-${part%% *}")
        timeout "${STAGE_LIMIT_S:-280}" python3 -m benchmarks.regrade_spread --track "$track" --kernels "${part// /,}" --regrades 5 \
          --budget 2 > "$log" 2>&1 || rc=1
        echo "[gpu_trusted] regrade $track ${part}: $(grep -c '^[a-z0-9_]*: ratio' "$log") ok"
      done
    done
    exit $rc ;;
  timing)
    shift
    [ $# -gt 0 ] || set -- gemm tensorcores attention transpose vecadd puzzles
    n=$(gpu_count) i=0 pids=()
    for track in "$@"; do   # track i on GPU i mod n; the tracks of one GPU one after another
      echo "$((i % n)) $track"; i=$((i + 1))
    done > /tmp/timing-plan
    for gpu in $(cut -d' ' -f1 /tmp/timing-plan | sort -un); do
      (for track in $(awk -v g="$gpu" '$1 == g {print $2}' /tmp/timing-plan); do
         log=$(logfile "$track" "grading-time-$track")
         CUDA_VISIBLE_DEVICES=$gpu timeout "${STAGE_LIMIT_S:-560}" python3 -m benchmarks.grading_time --track "$track" ${TIMING_SUBMISSIONS:+--submissions $TIMING_SUBMISSIONS} ${TIMING_PROFILE:+--profile-last} > "$log" 2>&1
         echo "[gpu_trusted] timing $track (GPU $gpu): rc $?; $(grep -E '^(reference|stub)[0-9]+:' "$log" | cut -c1-60 | tr '\n' ' ')"
       done) &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
    exit $rc ;;
  sanitizer-cost)
    shift
    log=$(logfile platform sanitizer-cost)
    timeout "${STAGE_LIMIT_S:-560}" python3 -m benchmarks.sanitizer_cost "$@" > "$log" 2>&1
    rc=$?; tail -20 "$log"; exit $rc ;;
  puzzle-cost)
    shift
    log=$(logfile puzzles puzzle-run-cost)
    timeout "${STAGE_LIMIT_S:-560}" python3 -m benchmarks.puzzle_run_cost "$@" > "$log" 2>&1
    rc=$?; tail -25 "$log"; exit $rc ;;
  regrade-parallel)
    shift
    n=$(gpu_count) i=0 pids=()
    for track in "$@"; do
      log=$(logfile "$track" "regrade-$track")
      (CUDA_VISIBLE_DEVICES=$((i % n)) timeout "${STAGE_LIMIT_S:-560}" python3 -m benchmarks.regrade_spread --track "$track" --regrades 5 \
         --budget 2 > "$log" 2>&1
       echo "[gpu_trusted] regrade $track: $(grep -c '^[a-z0-9_]*: ratio' "$log") ok") &
      pids+=($!); i=$((i + 1))
      if [ $((i % n)) -eq 0 ]; then for pid in "${pids[@]}"; do wait "$pid" || rc=1; done; pids=(); fi
    done
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
    exit $rc ;;
  fleet4)
    redis_from_debs
    log=$(logfile platform fleet-throughput-gemm-gpus)
    timeout 580 python3 -m benchmarks.fleet_throughput --track gemm --gpu --workers 1 "$(gpu_count)" \
      --submissions 4 $((4 * $(gpu_count))) --class-size 200 --project-gpus 4 --gradebook sqlite > "$log" 2>&1 || rc=1
    grep -E '^\| [0-9]|PROJECTED' "$log" | sed 's/^/[gpu_trusted] fleet4: /'
    [ -n "$OUT" ] && cp benchmarks/results/platform/fleet-throughput-*-"$(date +%Y%m%d)"-*.json "$OUT"/ 2>/dev/null
    exit $rc ;;
  fleet)
    redis_from_debs
    log=$(logfile platform fleet-throughput-gemm-gpu)
    timeout 400 python3 -m benchmarks.fleet_throughput --track gemm --gpu --workers 1 --submissions 4 \
      --class-size 200 --project-gpus 4 --gradebook sqlite > "$log" 2>&1 || rc=1
    echo "[gpu_trusted] fleet gemm gpu: $(grep -E '^\| 1 |PROJECTED' "$log" | tr '\n' ' ')"
    log=$(logfile platform fleet-throughput-puzzles-sim)
    timeout 170 python3 -m benchmarks.fleet_throughput --workers 1 2 --submissions 8 \
      --gradebook sqlite > "$log" 2>&1 || rc=1
    echo "[gpu_trusted] fleet puzzles sim: $(grep -c '^| [12] ' "$log") runs"
    [ -n "$OUT" ] && cp benchmarks/results/platform/fleet-throughput-*-"$(date +%Y%m%d)"-*.json "$OUT"/ 2>/dev/null
    exit $rc ;;
  grading)
    [ -f "tests/gpu/test_${2:-}_gpu.py" ] || { echo "usage: $0 grading TRACK (tests/gpu/test_TRACK_gpu.py)" >&2; exit 2; }
    run "$2" "$2-grading-gpu" 560 -m gpu "tests/gpu/test_$2_gpu.py" "${@:3}" ;;
  grading-parallel)
    shift
    for track in "$@"; do
      [ -f "tests/gpu/test_${track}_gpu.py" ] || { echo "no tests/gpu/test_${track}_gpu.py" >&2; exit 2; }
    done
    n=$(gpu_count) pids=()
    for gpu in $(seq 0 $((n - 1))); do   # track i on GPU i mod n
      tracks=$(for i in $(seq 0 $(($# - 1))); do [ $((i % n)) -eq "$gpu" ] && echo "${@:$((i + 1)):1}"; done)
      [ -n "$tracks" ] || continue
      (for track in $tracks; do
         CUDA_VISIBLE_DEVICES=$gpu run "$track" "$track-grading-gpu" 560 -m gpu "tests/gpu/test_${track}_gpu.py"
       done; exit $rc) &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done ;;
  first-runs)
    shift
    pids=()
    for track in "$@"; do
      [ -f "tests/gpu/test_${track}_gpu.py" ] || { echo "no tests/gpu/test_${track}_gpu.py" >&2; exit 2; }
      log=$(logfile "$track" "$track-first-run-gpu")
      (records=$(mktemp -d); OUT=$records timeout "${FIRST_RUN_LIMIT_S:-560}" python3 -m pytest -q -s -p no:cacheprovider -n 0 -m gpu \
         "tests/gpu/test_${track}_gpu.py" > "$log" 2>&1; status=$?; rm -rf "$records"
       echo "[gpu_trusted] first run $track: $(tail -1 "$log")"; exit $status) &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done ;;
  call-split)
    shift
    track=${1:-kernelbench} problems=()
    [ $# -gt 1 ] && problems=(--problems "${@:2}")
    log=$(logfile "$track" "$track-call-split")
    candidates=(); for c in ${CANDIDATES:-}; do candidates+=(--candidate "$c"); done
    timeout "${STAGE_LIMIT_S:-300}" python3 -m benchmarks.model_call_split --track "$track" "${problems[@]}" \
      "${candidates[@]}" > "$log" 2>&1 || rc=1
    grep -E '^[a-z_]+ .*: graded' "$log"
    exit $rc ;;
  profile)
    [ $# -ge 4 ] || { echo "usage: $0 profile TRACK SHAPE KERNEL..." >&2; exit 2; }
    track=$2 shape=$3; shift 3
    text=$(logfile "$track" "$track-ncu-profile-$shape") && text=${text%.log}.txt
    ncu=$(python3 -c "from graders.cuda_engine.sass import find_tool; print(find_tool('ncu') or 'ncu')")
    sections=($(python3 -c "from workshop.ncu import PROFILE_SECTIONS; print(*PROFILE_SECTIONS)"))
    timeout 300 "$ncu" --clock-control none "${sections[@]/#/--section=}" -k "regex:${NCU_KERNELS:-flash|attention}" \
      python3 -m workshop.ncu --baseline "$track" "$shape" "$@" > "$text" 2>&1 || rc=1
    echo "[gpu_trusted] profile $track $shape: $(grep -c 'Section: GPU Speed Of Light' "$text") kernels"
    exit $rc ;;
  profile-cases)
    [ $# -ge 3 ] && [ -n "${NCU_KERNELS:-}" ] || { echo "usage: NCU_KERNELS=REGEX $0 profile-cases SHAPE CASE..." >&2; exit 2; }
    shape=$2; shift 2
    track=${1%%:*} && text=$(logfile "$track" "$track-ncu-cases-$shape") && text=${text%.log}.txt
    ncu=$(python3 -c "from graders.cuda_engine.sass import find_tool; print(find_tool('ncu') or 'ncu')")
    sections=($(python3 -c "from workshop.ncu import PROFILE_SECTIONS; print(*PROFILE_SECTIONS)"))
    WORKSHOP_SANDBOX=off timeout "${STAGE_LIMIT_S:-300}" "$ncu" --clock-control none "${sections[@]/#/--section=}" \
      -k "regex:$NCU_KERNELS" python3 -m benchmarks.candidates --launch-once "$shape" "$@" > "$text" 2>&1 || rc=1
    echo "[gpu_trusted] profile-cases $shape: $(grep -c 'Section: GPU Speed Of Light' "$text") kernels"
    exit $rc ;;
  transpose)
    run transpose transpose-nbgrader-gpu 560 -m gpu tests/gpu/test_tracks_nbgrader_gpu.py \
      tests/gpu/test_transpose_nbgrader_gpu.py -k transpose ;;
  pack)
    [ -n "$OUT" ] || { echo "pack: no \$OUT (a device run's)" >&2; exit 2; }
    packed="results-$(date +%Y%m%d-%H%M%S).tgz"
    (cd "$OUT" && find . -type f ! -name 'results-*.tgz' | sort | tar czf "/tmp/$packed" -T - \
      && find . -type f ! -name 'results-*.tgz' -delete && find . -mindepth 1 -type d -empty -delete \
      && mv "/tmp/$packed" . && tar tzf "$packed") ;;
  *)
    [ -d "tracks/$1" ] || { echo "usage: $0 cases|TRACK" >&2; exit 2; }
    run "$1" "$1-track-nbgrader-gpu" 560 -m gpu tests/gpu/test_tracks_nbgrader_gpu.py -k "$1${2:+ and ($2)}" ;;
esac
# the nbgrader runs' records this run wrote (a first-runs stage's tests had a $OUT of their own, left behind)
[ -n "$OUT" ] && find benchmarks/results -name "*-nbgrader-gpu-*.json" -newer "$started" -exec cp {} "$OUT"/ \;
exit $rc
