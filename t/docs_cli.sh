#!/usr/bin/env bash
# docs_cli.sh — the docs against the binaries' --help. Every command and
# subcommand of drover (found from the "Commands:" lists), droverd,
# drover-agent, drover-gateway and every drover-sim command answers --help
# (exit 0); then one awk pass checks:
#   1. every flag the help lists (drover: the "Flags:" block, the global
#      ones for `drover --help`; the others: the usage lines and the flag
#      lines) and every DROVER_* variable it names is in that program's
#      section of docs/cli.md ("## get" for `drover get`, "## nodepool" for
#      `drover nodepool join-token`, "## droverd", "## drover-sim jobs",
#      "## Global flags" for drover's own), and every section exists;
#   2. every drover command is in the table at the top of docs/cli.md;
#   3. every command line the docs show (code blocks, and `...` spans that
#      start with a program's name) in README.md and docs/*.md names a
#      command that exists and only flags that command takes (drover's
#      global flags with every command).
# Cheap: one process per --help screen and one awk. It fails on a flag
# left out of its section, a section missing, or a documented flag or
# command the binary does not have; counts below a floor fail too, so a
# help format the parser no longer reads cannot pass unchecked.
. "$(dirname "$0")/lib/common.bash"

BIN=$BIN_DIR
N=0

# help_of UNIT PROGRAM [ARGS...]: PROGRAM ARGS --help into $TMP/help.N, after
# a first line "@@@ UNIT"; the file in $LAST.
help_of()
{
    local unit=$1 rc
    shift
    N=$((N + 1))
    LAST=$TMP/help.$N
    { printf '@@@ %s\n' "$unit"; "$@" --help; } >"$LAST" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || { fail "$unit --help exits 0"; why "exit $rc"; }
}

# commands FILE: CMDS=(the names FILE lists as commands): the lines of a
# "Commands:" block (drover), or "  NAME  text" lines (drover-sim)
commands()
{
    local line in=0 re='^  ([a-z][a-z-]*)  '
    CMDS=()
    while IFS= read -r line; do
        if [ "$line" == "Commands:" ]; then
            in=1
        elif [ "$in" == 1 ] && [ -z "$line" ]; then
            break
        elif { [ "$in" == 1 ] || [ "${2-}" == any ]; } && [[ "$line" =~ $re ]]; then
            CMDS+=("${BASH_REMATCH[1]}")
        fi
    done <"$1"
}

help_of drover "$DROVER"
commands "$LAST"
# `drover version` (= --version, docs/cli.md "Global flags") and `drover
# help` close the list: words main() takes before the command table, with
# no --help screen of their own
[ "${CMDS[-2]}" == version ] && [ "${CMDS[-1]}" == help ] ||
    fail "drover --help's command list ends with version and help"
unset 'CMDS[-1]' 'CMDS[-1]'
N=$((N + 1))
{ printf '@@@ drover version\n'; "$DROVER" version; } >"$TMP/help.$N" 2>&1
[[ "$(<"$TMP/help.$N")" == *$'\n'"drover "* ]] || fail "drover version prints the version"
TOP=("${CMDS[@]}")
for c in "${TOP[@]}"; do
    help_of "drover $c" "$DROVER" "$c"
    commands "$LAST"
    for s in "${CMDS[@]}"; do
        help_of "drover $c $s" "$DROVER" "$c" "$s"
    done
done
help_of droverd "$DROVERD"
help_of drover-agent "$BIN/drover-agent"
help_of drover-gateway "$BIN/drover-gateway"
help_of drover-sim "$BIN/drover-sim"
commands "$LAST" any
for c in "${CMDS[@]}"; do
    help_of "drover-sim $c" "$BIN/drover-sim" "$c"
done
[ "${#TOP[@]}" -ge 15 ] && [ "$N" -ge 40 ] && ok "read $N --help screens" ||
    { fail "read the --help screens"; why "${#TOP[@]} drover commands, $N screens"; }

HELPS=()
for ((i = 1; i <= N; i++)); do HELPS+=("$TMP/help.$i"); done
DOCS=("$DROVER_SRC/README.md")
for f in "$DROVER_SRC"/docs/*.md; do
    [ "$f" != "$DROVER_SRC/docs/cli.md" ] && DOCS+=("$f")
done

# Flags the docs name that a --help does not list: drover-sim jobs still
# takes the switches of rules that became the default (no effect; docs/cli.md
# says so) and docs/benchmarks.md gives the commands that measured them
# then; --due-ahead was an experiment on branch jobdue-due-ahead-exp, never
# merged (docs/benchmarks.md says so).
HIDDEN_SIM_JOBS="--reserve-bounded --reserve-due --edf-guard --sticky-due --due-ahead"

# The checks. Help files first (their first line names the unit), then
# docs/cli.md (sections), then the docs whose command lines are checked.
awk -v root="$DROVER_SRC/" -v cli="$DROVER_SRC/docs/cli.md" -v hidden_sim_jobs="$HIDDEN_SIM_JOBS" '
function fail(cat, msg) { failed[cat]++; print "FAIL\t" msg }
function file() { return index(FILENAME, root) == 1 ? substr(FILENAME, length(root) + 1) : FILENAME }
# flag tokens of s: "-x" or "--long" at the start or after " [(|,/"
function addflags(u, s, takes,   f) {
    while (match(s, /(^|[ [(|,\/])--?[a-zA-Z][a-zA-Z0-9-]*/)) {
        f = substr(s, RSTART, RLENGTH)
        sub(/^[^-]/, "", f)
        flag[u, f] = 1
        nflags[u]++
        flaglist[u] = flaglist[u] " " f
        if (takes) value[u, f] = 1
        s = substr(s, RSTART + RLENGTH)
    }
}
# the left column of a flag line: up to the first two spaces
function left(s,   i) {
    sub(/^ +/, "", s)
    i = index(s, "  ")
    return i ? substr(s, 1, i - 1) : s
}
function addenv(u, s) {
    while (match(s, /DROVER_[A-Z0-9_]*[A-Z0-9]/)) {
        env[u, substr(s, RSTART, RLENGTH)] = 1
        envlist[u] = envlist[u] " " substr(s, RSTART, RLENGTH)
        s = substr(s, RSTART + RLENGTH)
    }
}
# w occurs in t as a word: no letter, digit or "-" right before or after it
function hasword(t, w,   i, b, a) {
    while ((i = index(t, w)) > 0) {
        b = i > 1 ? substr(t, i - 1, 1) : " "
        a = substr(t, i + length(w), 1)
        if (b !~ /[a-zA-Z0-9-]/ && a !~ /[a-zA-Z0-9-]/)
            return 1
        t = substr(t, i + length(w))
    }
    return 0
}
function isbin(w) {
    sub(/^.*\//, "", w)
    return w == "drover" || w == "droverd" || w == "drover-agent" || w == "drover-gateway" || w == "drover-sim"
}
# the docs/cli.md section of unit u: a heading (or one of its ", " parts)
# equal to the command path, else to its first word (drover) or program
function section(u,   path, first, h, n, p, i, pass) {
    if (u == "drover" || u == "drover version")
        return "Global flags" in sect ? "Global flags" : ""
    path = u
    first = u
    sub(/ .*/, "", first)
    if (u ~ /^drover /) {
        sub(/^drover /, "", path)
        first = path
        sub(/ .*/, "", first)
    }
    for (pass = 1; pass <= 3; pass++)
        for (h in sect) {
            n = split(h, p, ", ")
            for (i = 1; i <= n; i++)
                if (pass == 1 && p[i] == path || pass == 2 && p[i] == first ||
                    pass == 3 && u ~ /^drover / && index(p[i], first " ") == 1)
                    return h
        }
    return ""
}
# check one command line of the docs
function cmdline(s, where,   n, t, i, bin, u, w, f, q, depth, c, k) {
    gsub(/\t/, " ", s)
    gsub(/\/--/, " --", s)
    n = split(s, t, " ")
    i = 1
    if (t[i] == "$") i++
    while (i <= n && (t[i] ~ /^[A-Z_][A-Z0-9_]*=/ || t[i] == "sudo" || t[i] == "nice" || t[i] == "exec"))
        i++
    if (i > n || !isbin(t[i]))
        return
    bin = t[i]
    sub(/^.*\//, "", bin)
    u = bin
    if (!(u in units))
        return
    ncmd++
    # the command words: drover [global flags] CMD [SUB], drover-sim CMD
    for (i++; i <= n; i++) {
        w = t[i]
        if (w ~ /^-/) {
            f = w
            sub(/=.*/, "", f)
            if (u == "drover" && value["drover", f] && w !~ /=/)
                i++
            continue
        }
        if (!hassub[u])
            break
        # not a command word (a placeholder, "drover get: unknown ...",
        # `drover help CMD`): nothing to check
        if (w !~ /^[a-z][a-z-]*$/ || w == "help")
            return
        if ((u " " w) in units) {
            u = u " " w
            continue
        }
        fail("cmds", where ": `" s "`: " u " has no command \"" w "\"")
        return
    }
    q = ""
    depth = 0
    for (i = 1; i <= n; i++) {
        w = t[i]
        if (q != "") {
            if (w ~ ("\\" q "$")) q = ""
            continue
        }
        c = substr(w, 1, 1)
        if ((c == "\047" || c == "\"") && !(length(w) > 1 && substr(w, length(w)) == c)) {
            q = c
            continue
        }
        if (w ~ /^#/ || depth == 0 && (w == "|" || w == "||" || w == "&&" || w == ";" || w ~ /^[0-9]?[<>]/))
            break
        for (k = 1; k <= length(w); k++) {
            c = substr(w, k, 1)
            if (c == "[" || c == "(") depth++
            else if (c == "]" || c == ")") depth--
        }
        gsub(/^[[(]+|[])},.:;`]+$/, "", w)
        if (w !~ /^--?[a-zA-Z]/)
            continue
        sub(/=.*/, "", w)
        if (w == "--help" || w == "-h")
            continue
        nflag++
        if (flag[u, w] || (bin == "drover" && flag["drover", w]) || index(" " hidden[u] " ", " " w " "))
            continue
        if (hassub[u] && anysub(u, w))
            continue
        fail("flags", where ": `" s "`: " u " has no flag " w)
    }
}
function anysub(u, w,   k) {
    for (k in units)
        if (index(k, u " ") == 1 && flag[k, w])
            return 1
    return 0
}
function para(   s, r) {
    s = ptext
    while (match(s, /`[^`]+`/)) {
        r = substr(s, RSTART + 1, RLENGTH - 2)
        cmdline(r, pfile ":" pline)
        s = substr(s, RSTART + RLENGTH)
    }
    ptext = ""
}

BEGIN { hidden["drover-sim jobs"] = hidden_sim_jobs }
FNR == 1 && /^@@@ / {
    unit = substr($0, 5)
    units[unit] = 1
    norder++
    order[norder] = unit
    bin = unit
    sub(/ .*/, "", bin)
    if (unit ~ / /) {
        parent = unit
        sub(/ [^ ]*$/, "", parent)
        hassub[parent] = 1
    }
    mode = ""
    next
}
FILENAME ~ /\/help\.[0-9]+$/ {
    if (bin == "drover") {
        # a command screen ends with the global flags: those are for "drover"
        if (unit != "drover" && $0 ~ /^Global flags/) mode = "g"
        if (mode == "g") next
        addenv(unit, $0)
        if ($0 == "Flags:" || (unit == "drover" && $0 ~ /^Global flags/)) { mode = "f"; next }
        if ($0 == "" || $0 ~ /^[A-Z]/) mode = ""
        if (mode == "f")
            addflags(unit, left($0), left($0) ~ / [A-Z]/)
    } else {
        addenv(unit, $0)
        if ($0 ~ /^usage:/) mode = "u"
        else if ($0 == "") mode = ""
        if (mode == "u") addflags(unit, $0, 0)
        else if (match($0, /^ +-/) && RLENGTH <= 7) addflags(unit, left($0), 0)
    }
    next
}
# every doc: fences, paragraphs (for `...` spans), cli.md sections
FNR == 1 { if (ptext != "") para(); fence = 0; cur = ""; cont = "" }
/^```/ {
    if (ptext != "") para()
    if (fence && cont != "") { cmdline(cont, file() ":" cline); cont = "" }
    fence = !fence
    next
}
fence {
    if (FILENAME == cli && cur != "") sect[cur] = sect[cur] "\n" $0
    s = $0
    # a continuation: the line before ended with "\", or this one starts
    # (indented) with "[" or "-"
    if (cont != "" && (cont ~ /\\$/ || s ~ /^ +[[-]/)) {
        sub(/\\$/, "", cont)
        cont = cont " " s
        next
    }
    if (cont != "") cmdline(cont, file() ":" cline)
    cont = ""
    t = s
    sub(/^ *(\$ +)?/, "", t)
    w = t
    sub(/ .*/, "", w)
    if (isbin(w)) { cont = s; cline = FNR }
    next
}
FILENAME == cli && /^## / {
    cur = substr($0, 4)
    sect[cur] = ""
}
FILENAME == cli && cur == "" { intro = intro "\n" $0 }
FILENAME == cli && cur != "" { sect[cur] = sect[cur] "\n" $0 }
/^[ \t]*$/ { if (ptext != "") para(); next }
{
    if (ptext == "") { pline = FNR; pfile = file() }
    ptext = ptext " " $0
}
END {
    if (ptext != "") para()
    for (j = 1; j <= norder; j++) {
        u = order[j]
        h = section(u)
        if (h == "") {
            fail("sections", "docs/cli.md has a section for `" u "`")
            continue
        }
        nsect++
        m = split(flaglist[u], fl, " ")
        for (k = 1; k <= m; k++) {
            if (fl[k] == "--help" || fl[k] == "-h" || seen[u, fl[k]]++)
                continue
            nfwd++
            if (!hasword(sect[h], fl[k]))
                fail("fwd", "docs/cli.md \"## " h "\" does not mention " fl[k] " of `" u " --help`")
        }
        m = split(envlist[u], fl, " ")
        for (k = 1; k <= m; k++) {
            if (seen[u, fl[k]]++)
                continue
            nenv++
            if (!hasword(sect[h], fl[k]))
                fail("fwd", "docs/cli.md \"## " h "\" does not mention " fl[k] " of `" u " --help`")
        }
        if (u ~ /^drover [a-z-]+$/ && u != "drover version") {
            w = substr(u, 8)
            ntable++
            if (index(intro, "| `" w " ") == 0 && index(intro, "| `" w "`") == 0)
                fail("table", "the table at the top of docs/cli.md has no row for `" u "`")
        }
    }
    printf "SUM\t%d\t%d\tevery program has its docs/cli.md section (%d programs and commands)\n", nsect, failed["sections"], nsect
    printf "SUM\t%d\t%d\tevery flag and DROVER_ variable of the --help screens is in its section (%d flags, %d variables)\n", nfwd, failed["fwd"], nfwd, nenv
    printf "SUM\t%d\t%d\tevery drover command is in the table at the top of docs/cli.md (%d)\n", ntable, failed["table"], ntable
    printf "SUM\t%d\t%d\tthe command lines of the docs name existing commands (%d lines)\n", ncmd, failed["cmds"], ncmd
    printf "SUM\t%d\t%d\tthe command lines of the docs use existing flags (%d flags)\n", nflag, failed["flags"], nflag
}
' "${HELPS[@]}" "$DROVER_SRC/docs/cli.md" "${DOCS[@]}" >"$TMP/result"

# floors: what the docs and help screens hold today, roughly halved
declare -A FLOOR=([1]=20 [2]=90 [3]=10 [4]=150 [5]=170)
i=0
while IFS=$'\t' read -r kind a b c; do
    if [ "$kind" == FAIL ]; then
        fail "$a"
    elif [ "$kind" == SUM ]; then
        i=$((i + 1))
        if [ "$b" -ne 0 ]; then
            fail "$c: $b failed"
        elif [ "$a" -lt "${FLOOR[$i]}" ]; then
            fail "$c: fewer than ${FLOOR[$i]} checked (the help or docs format changed?)"
        else
            ok "$c"
        fi
    fi
done <"$TMP/result"
[ "$i" -eq 5 ] || fail "the awk pass printed its 5 summaries (got $i)"

t_done
