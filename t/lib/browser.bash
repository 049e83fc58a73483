# browser.bash — a console test's browser run (sourced after common.bash):
# browser_run SCRIPT runs t/console/SCRIPT (node, playwright-core from
# t/console/node_modules, headless Chromium) with the caller's exported
# environment; each of its "ok - " / "FAIL - " lines counts as one check
# here, and E2E_RC gets its exit status ("none" when it did not end). No
# node or no playwright-core: a failure, never a skip (t_done at once).
browser_run()
{
    local dir=$DROVER_SRC/t/console
    if ! command -v node >/dev/null 2>&1; then
        fail "node is installed (run scripts/install-deps)"
        t_done
    fi
    if [ ! -f "$dir/node_modules/playwright-core/package.json" ]; then
        fail "playwright-core is installed in t/console (run scripts/install-deps)"
        t_done
    fi
    local line
    while IFS= read -r line; do
        case $line in
            "ok - "*) ok "${line#ok - }" ;;
            "FAIL - "*) fail "${line#FAIL - }" ;;
            *) echo "$line" ;;
        esac
    done < <(node "$dir/$1" 2>&1; echo $? >"$TMP/e2e.rc")
    E2E_RC=$(cat "$TMP/e2e.rc" 2>/dev/null || echo "none")
}
