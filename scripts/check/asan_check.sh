#!/usr/bin/env bash
# Run the compiled code's tests and a short fuzz under AddressSanitizer, in a
# copy of the tree built with -fsanitize=address (this tree is not touched):
#
#     bash scripts/check/asan_check.sh [FUZZ_MINUTES]
#
# Any out-of-bounds read or write in the extensions aborts with an
# "AddressSanitizer" report.  Expected failures: the CLI tests' peak-memory
# bounds (tests/test_hostile.py), since ASan's shadow memory puts every process
# at ~64 MiB.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
minutes="${1:-1.5}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$repo" "$work/tree"
[ -d "$repo/../shared" ] && ln -s "$(cd "$repo/../shared" && pwd)" "$work/shared"
cd "$work/tree" && rm -f spamnb/*.so
CFLAGS="-fsanitize=address -fno-omit-frame-pointer -O1" LDFLAGS="-fsanitize=address" \
    python3 setup.py build_ext --inplace >"$work/build.log" 2>&1 || { tail -20 "$work/build.log"; exit 1; }
export LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
    PYTHONMALLOC=malloc PYTHONPATH="$work/tree"
python3 -m pytest -p no:cacheprovider -q tests/test_mail.py tests/test_tokenizer.py tests/test_vocabulary.py \
    tests/test_filter.py tests/test_hostile.py tests/test_model_file.py 2>&1 | tee "$work/tests.log" | tail -3
for limits in "" "--large-limits"; do
    python3 scripts/check/fuzz.py --minutes "$minutes" $limits --model "$work/fuzz$limits.spamnb" --cli-every 1000000 \
        2>&1 | grep -E "inputs tried|Sanitizer"
done
echo "AddressSanitizer reports: $(grep -c AddressSanitizer "$work/tests.log")"
