#!/usr/bin/env bash
# layers.sh — the include check of src/ (scripts/check-layers; the layers
# are in docs/architecture.md, "Layers"). First the checker itself on small
# trees made here: a clean tree passes; a folder including one its row does
# not allow, an unknown folder, an include not of the form "folder/file.h",
# an include of a missing file and two headers including each other each
# fail (exit 1) naming file:line; --graph marks the bad arrow; bad usage
# exits 2. Then the real tree: every folder of src/ within its row.
. "$(dirname "$0")/lib/common.bash"

CHECK=$DROVER_SRC/scripts/check-layers

# tree NAME FILE CONTENT [FILE CONTENT...]: a tree $TMP/NAME/src with these files.
tree()
{
    local root=$TMP/$1
    shift
    rm -rf "$root"
    while [ $# -ge 2 ]; do
        mkdir -p "$(dirname "$root/src/$1")"
        printf '%s\n' "$2" >"$root/src/$1"
        shift 2
    done
    echo "$root"
}

# expect NAME WANT_RC NEEDLE ROOT [ARGS...]: check-layers --root ROOT exits
# WANT_RC and prints NEEDLE.
expect()
{
    local name=$1 want=$2 needle=$3 root=$4
    shift 4
    local out got
    out=$("$CHECK" --root "$root" "$@" 2>&1)
    got=$?
    if [ "$got" -eq "$want" ] && [[ "$out" == *"$needle"* ]]; then
        ok "$name"
    else
        fail "$name"
        why "exit $got (want $want), want '$needle' in:" "$out"
    fi
}

# ---- the checker on small trees ----------------------------------------------------
good=$(tree good common/a.h '#include <stdio.h>' \
    sched/place.h '#include "common/a.h"' \
    sched/fit.c '#include "sched/place.h"
#include "common/a.h"')
expect "a clean tree passes" 0 "check-layers: ok: 3 files in src/" "$good"

bad=$(tree bad common/a.h '' sched/place.h '#include "common/a.h"' \
    common/x.c '/* x */
#include "common/a.h"
#include "sched/place.h"')
expect "a folder including one not in its row fails, naming file:line and the rule" 1 \
    'src/common/x.c:3: #include "sched/place.h": common/ may not include sched/' "$bad"
expect "the rule of the folder is printed" 1 "the rule common/ keeps: pure utilities" "$bad"
expect "--graph marks the arrow not allowed" 1 "common     -> *sched(1)" "$bad" --graph
expect "--only another folder does not report it" 0 "ok: 1 files in folders sched" "$bad" \
    --only sched
expect "--only that folder reports it" 1 "common/ may not include sched/" "$bad" --only common

unknown=$(tree unknown common/a.h '' foo/y.c '#include "common/a.h"')
expect "a folder not in the table fails" 1 "src/foo/y.c: folder foo/ is not in the table" \
    "$unknown"
unknown_to=$(tree unknown_to common/x.c '#include "bar/b.h"')
expect "including a folder not in the table fails" 1 \
    'src/common/x.c:1: #include "bar/b.h": bar/ is not a folder of the table' "$unknown_to"

style=$(tree style common/a.h '' common/x.c '#include "a.h"')
expect "an include without its folder fails" 1 \
    'src/common/x.c:1: #include "a.h": include style is "folder/file.h"' "$style"
missing=$(tree missing common/x.c '#include "common/nope.h"')
expect "an include of a missing file fails" 1 \
    'src/common/x.c:1: #include "common/nope.h": no such file under src/' "$missing"

cycle=$(tree cycle common/a.h '#include "common/b.h"' common/b.h '#include "common/a.h"' \
    common/c.c '#include "common/a.h"')
expect "headers including each other fail" 1 \
    "include cycle: common/a.h -> common/b.h -> common/a.h" "$cycle"

expect "an unknown flag is a usage error" 2 "unknown argument" "$good" --frobnicate
expect "--only an unknown folder is a usage error" 2 "not a folder of the table: nope" \
    "$good" --only nope
expect "a root without src/ is a usage error" 2 "no src/ under" "$TMP/none"

# ---- the real tree ------------------------------------------------------------------
out=$("$CHECK" 2>&1)
rc=$?
if [ "$rc" -eq 0 ]; then
    ok "src/ keeps its layers (${out##*ok: })"
else
    fail "src/ keeps its layers (scripts/check-layers exit $rc)"
    printf '%s\n' "$out" | sed 's/^/    # /'
fi

t_done
