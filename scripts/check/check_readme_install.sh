#!/usr/bin/env bash
# The README's first command as a new user runs it, then the distribution.
#
#   bash scripts/check/check_readme_install.sh [REPO]      (REPO: this checkout by default)
#
# 1. Clones REPO (its committed HEAD: a clean clone, nothing built, nothing
#    ignored) into a temporary folder, makes a fresh venv without system
#    site-packages, and runs the first line of README.md's first code block
#    there word for word (read from the clone's README.md, so CI and the README
#    cannot drift apart).  Its last line of output must be the spam verdict.
# 2. `python -m build` in the clone: an sdist, and a wheel built from that sdist.
# 3. The sdist installed into a second fresh venv, the wheel into a third with
#    binaries only (`--only-binary :all:`, CC and CXX set to `false`: nothing
#    is compiled); each trains on the sample corpus, classifies a spam, and
#    must have installed the manual page equal to its own `spamnb --man`,
#    the build's compiled patterns (spamnb/mail/_sre_codes.py, for its interpreter)
#    and the launcher's Python byte-compiled (spamnb/_launcher.py), which it runs.
# Prints the wall time of each step; exits non-zero at the first failure.
# The model goes to a temporary SPAMNB_HOME, never to ~/.spamnb.
set -euo pipefail
repo=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/spamnb-readme.XXXXXX")
trap 'rm -rf "$work"' EXIT
export SPAMNB_HOME="$work/home" PIP_DISABLE_PIP_VERSION_CHECK=1
python=${PYTHON:-python3}

step() {   # step NAME COMMAND...: runs it, prints its wall time, keeps its output in $work/NAME.log
    local name=$1 start end; shift
    start=$(date +%s%N)
    if ! "$@" >"$work/$name.log" 2>&1; then
        echo "check_readme_install: $name failed; its last lines:" >&2
        tail -n 30 "$work/$name.log" >&2
        exit 1
    fi
    end=$(date +%s%N)
    printf '%-34s %5d.%d s\n' "$name" $(( (end - start) / 1000000000 )) $(( (end - start) / 100000000 % 10 ))
}

expect_spam() {   # expect_spam LOG: the last line of LOG is a spam verdict
    local last; last=$(tail -n 1 "$1")
    case "$last" in
        spam\ *) echo "  -> $last" ;;
        *) echo "check_readme_install: expected a spam verdict, got: $last" >&2; exit 1 ;;
    esac
}

git clone -q "$repo" "$work/clone"
first=$(awk '/^```/ { n++; next } n == 1 { print; exit }' "$work/clone/README.md")
[ -n "$first" ] || { echo "check_readme_install: README.md has no first code block" >&2; exit 1; }
echo "README's first command: $first"

"$python" -m venv "$work/venv"
step "readme-first-command" bash -c "cd '$work/clone' && . '$work/venv/bin/activate' && $first"
expect_spam "$work/readme-first-command.log"

step "build-tools" "$work/venv/bin/pip" install -q build
step "python-m-build" "$work/venv/bin/python" -m build --outdir "$work/dist" "$work/clone"
sdist=$(ls "$work"/dist/spamnb-*.tar.gz)
wheel=$(ls "$work"/dist/spamnb-*.whl)
if grep -iE 'deprecat' "$work/python-m-build.log" >&2; then
    echo "check_readme_install: the build warns of deprecations (above)" >&2; exit 1
fi

for kind in sdist wheel; do
    venv="$work/venv-$kind"
    "$python" -m venv "$venv"
    if [ "$kind" = sdist ]; then
        step "install-sdist" "$venv/bin/pip" install -q "$sdist"
    else
        step "install-wheel (no compiler)" env CC=false CXX=false \
            "$venv/bin/pip" install -q --only-binary :all: "$wheel"
    fi
    rm -rf "$SPAMNB_HOME"
    step "$kind: train + classify" bash -c "cd '$work/clone' && '$venv/bin/spamnb' train -q corpora/ \
        && '$venv/bin/spamnb' classify corpora/spam/00017.*"
    expect_spam "$work/$kind: train + classify.log"
    ( cd / && "$venv/bin/spamnb" --man ) | cmp - "$venv/share/man/man1/spamnb.1" \
        || { echo "check_readme_install: the $kind's manual page differs from its spamnb --man" >&2; exit 1; }
    ( cd / && "$venv/bin/python" -c "import spamnb.bayes.kernels as k; assert k.IMPLEMENTATION == 'cython', k.IMPLEMENTATION" )
    # the build's compiled patterns (spamnb/mail/_sre_codes.py), made for this interpreter: no re on the mail path
    ( cd / && "$venv/bin/python" -c "from spamnb.mail import lazy_re as l; assert len(l._table()) >= 20, l._table()" )
    # the launcher's Python, byte-compiled by pip (spamnb/_launcher.py, written by the build), is what it runs
    launched=$(cd / && sh -x "$venv/bin/spamnb" --version 2>&1 >/dev/null | grep '^+ exec ')
    case "$launched" in
        *" -S -P $venv/lib/python3."*"/site-packages/spamnb/__pycache__/_launcher.cpython-3"*".pyc --version") ;;
        *) echo "check_readme_install: the $kind's launcher does not run its byte-compiled file: $launched" >&2
           exit 1 ;;
    esac
done
echo "check_readme_install: the README's first command, the sdist and the wheel all work"
